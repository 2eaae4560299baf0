//go:build linux

package bench

// The founder as a child process for BenchmarkLongPoll10k: the real
// `stratum serve` binary, its banner, its admin API, /proc and /metrics.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// lpFounder is one running `stratum serve --dev` child.
type lpFounder struct {
	cmd      *exec.Cmd
	dir      string
	apiAddr  string
	joinAddr string
	logPath  string
	exited   chan struct{} // closed when the process has exited
	exitErr  error
	roots    *x509.CertPool
	admin    *http.Client
	token    string
}

// lpBuildFounder builds the stratum binary once (or takes STRATUM_BIN).
func lpBuildFounder(b *testing.B) string {
	if bin := os.Getenv("STRATUM_BIN"); bin != "" {
		return bin
	}
	return stratumtest.Binary(b)
}

// lpStartFounder runs `stratum serve --dev` on dir with ephemeral ports
// and waits for its banner. logName names the file its stderr goes to.
func lpStartFounder(b *testing.B, bin, dir, logName string) *lpFounder {
	f := &lpFounder{dir: dir, logPath: filepath.Join(filepath.Dir(dir), logName), exited: make(chan struct{})}
	logFile, err := os.Create(f.logPath)
	if err != nil {
		b.Fatal(err)
	}
	f.cmd = exec.Command(bin, "serve", "--dev", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0")
	f.cmd.Stderr = logFile
	// The founder dies with this process, whatever ends it.
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		f.exitErr = f.cmd.Wait()
		logFile.Close()
		close(f.exited)
	}()
	addrs := make(chan [2]string, 1)
	go func() {
		var api, join string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if _, v, ok := strings.Cut(line, "admin API:"); ok {
				api = strings.TrimPrefix(strings.TrimSpace(v), "https://")
			}
			if _, v, ok := strings.Cut(line, "join listener:"); ok {
				join = strings.TrimPrefix(strings.TrimSpace(v), "https://")
			}
			if api != "" && join != "" {
				addrs <- [2]string{api, join}
				api, join = "", ""
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addrs:
		f.apiAddr, f.joinAddr = a[0], a[1]
	case <-f.exited:
		b.Fatalf("founder exited before its banner: %v\n%s", f.exitErr, f.logTail(20))
	case <-time.After(60 * time.Second):
		f.kill()
		b.Fatalf("no founder banner within 60s\n%s", f.logTail(20))
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		b.Fatal(err)
	}
	f.roots = x509.NewCertPool()
	if !f.roots.AppendCertsFromPEM(pem) {
		b.Fatal("ca.pem holds no certificate")
	}
	f.admin = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.roots, ServerName: "127.0.0.1"}, MaxIdleConnsPerHost: 4,
	}}
	f.login(b)
	return f
}

func (f *lpFounder) pid() int { return f.cmd.Process.Pid }

// kill ends the child at once (failure paths).
func (f *lpFounder) kill() {
	_ = f.cmd.Process.Kill()
	<-f.exited
}

// stop sends SIGTERM and waits for the exit; it answers how long that took.
func (f *lpFounder) stop(b *testing.B) time.Duration {
	start := time.Now()
	if err := f.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	select {
	case <-f.exited:
	case <-time.After(30 * time.Second):
		f.kill()
		b.Fatalf("founder did not exit within 30s of SIGTERM\n%s", f.logTail(20))
	}
	if f.exitErr != nil {
		b.Errorf("founder exit after SIGTERM: %v\n%s", f.exitErr, f.logTail(20))
	}
	return time.Since(start)
}

// logTail is the last n lines of the founder's stderr.
func (f *lpFounder) logTail(n int) string {
	raw, _ := os.ReadFile(f.logPath)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// logCount counts stderr lines containing s.
func (f *lpFounder) logCount(s string) int {
	raw, _ := os.ReadFile(f.logPath)
	return bytes.Count(raw, []byte(s))
}

// login reads the bootstrap credentials and logs in.
func (f *lpFounder) login(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join(f.dir, "bootstrap-credentials.txt"))
	if err != nil {
		b.Fatal(err)
	}
	creds := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			creds[k] = v
		}
	}
	var out struct {
		Token string `json:"token"`
	}
	f.call(b, "POST", "/v1/auth/login", map[string]string{"email": creds["email"], "password": creds["password"]}, http.StatusOK, &out)
	if out.Token == "" {
		b.Fatal("login answered no token")
	}
	f.token = out.Token
}

// call sends one admin API request and decodes the answer into out.
func (f *lpFounder) call(b *testing.B, method, path string, in any, want int, out any) {
	if err := f.do(method, path, in, want, out); err != nil {
		b.Fatal(err)
	}
}

func (f *lpFounder) do(method, path string, in any, want int, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(method, "https://"+f.apiAddr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := f.admin.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d (want %d): %s", method, path, resp.StatusCode, want, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// lpMetrics is a few gauges of the founder's GET /metrics.
type lpMetrics struct {
	goroutines, openFDs, heapInuse, stackInuse, waiters float64
}

func (f *lpFounder) metrics(b *testing.B) lpMetrics {
	resp, err := f.admin.Get("https://" + f.apiAddr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m lpMetrics
	want := map[string]*float64{
		"go_goroutines":                 &m.goroutines,
		"process_open_fds":              &m.openFDs,
		"go_memstats_heap_inuse_bytes":  &m.heapInuse,
		"go_memstats_stack_inuse_bytes": &m.stackInuse,
		"stratum_join_waiters":          &m.waiters,
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if p := want[name]; ok && p != nil {
			*p, _ = strconv.ParseFloat(strings.TrimSpace(val), 64)
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return m
}

// lpProcMem is the founder's resident memory from /proc/PID/status, KiB.
type lpProcMem struct {
	rss, anon, file int64
}

func (f *lpFounder) procMem(b *testing.B) lpProcMem {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", f.pid()))
	if err != nil {
		b.Fatal(err)
	}
	var m lpProcMem
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file}
	for line := range strings.SplitSeq(string(raw), "\n") {
		parts := strings.Fields(line)
		if len(parts) >= 2 && fields[parts[0]] != nil {
			*fields[parts[0]], _ = strconv.ParseInt(parts[1], 10, 64)
		}
	}
	return m
}

// cpu is the founder's user+system CPU time so far, from /proc/PID/stat
// (ticks of USER_HZ, 100 on Linux), or from the exit status once it has
// exited.
func (f *lpFounder) cpu() time.Duration {
	select {
	case <-f.exited:
		return f.cmd.ProcessState.UserTime() + f.cmd.ProcessState.SystemTime()
	default:
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", f.pid()))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	_, rest, _ := bytes.Cut(raw, []byte(") "))
	p := strings.Fields(string(rest))
	if len(p) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(p[11], 10, 64)
	stime, _ := strconv.ParseInt(p[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// lpLoad is the machine's one-minute load average: the founder shares
// the CPUs with this process and whatever else runs.
func lpLoad() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	if p := strings.Fields(string(raw)); len(p) > 0 {
		return p[0]
	}
	return "?"
}

// fdLimit is the founder's open-files limit, from /proc/PID/limits.
func (f *lpFounder) fdLimit() string {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", f.pid()))
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			p := strings.Fields(line)
			if len(p) >= 5 {
				return p[3] + "/" + p[4]
			}
		}
	}
	return "?"
}
