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
	proc     *stratumtest.Founder // nil for an in-process founder
	dir      string
	apiAddr  string
	joinAddr string
	logPath  string
	exited   <-chan struct{}
	roots    *x509.CertPool
	admin    *http.Client
	token    string
	// inProcess: founder.Serve runs in this process (cpu is this process's)
	inProcess bool
}

// lpStartFounder runs `stratum serve --dev` on dir with ephemeral ports
// (the shared test harness, binary built once) and logs in. logName
// names the file beside dir its output goes to.
func lpStartFounder(b *testing.B, dir, logName string) *lpFounder {
	logPath := filepath.Join(filepath.Dir(dir), logName)
	p := stratumtest.StartFounder(b, stratumtest.FounderOptions{Dir: dir, Dev: true, LogFile: logPath})
	f := &lpFounder{proc: p, dir: dir, apiAddr: p.API, joinAddr: p.Join, logPath: logPath, exited: p.Exited(), roots: p.Pool}
	f.admin = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.roots, ServerName: "127.0.0.1"}, MaxIdleConnsPerHost: 4,
	}}
	f.login(b)
	return f
}

func (f *lpFounder) pid() int { return f.proc.Process().Pid }

// kill ends the child at once (failure paths).
func (f *lpFounder) kill() { f.proc.Kill() }

// stop sends SIGTERM and waits for the exit; it answers how long that took.
func (f *lpFounder) stop(b *testing.B) time.Duration {
	code, took, err := f.proc.Signal(syscall.SIGTERM, 30*time.Second)
	if err != nil {
		b.Fatalf("%v\n%s", err, f.logTail(20))
	}
	if code != 0 {
		b.Errorf("founder exit %d after SIGTERM\n%s", code, f.logTail(20))
	}
	return took
}

// logTail is the last n lines of the founder's output.
func (f *lpFounder) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(f.proc.Output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// logCount counts output lines containing s.
func (f *lpFounder) logCount(s string) int { return strings.Count(f.proc.Output(), s) }

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
	if f.inProcess {
		return processCPU()
	}
	select {
	case <-f.exited:
		ps := f.proc.ProcessState()
		return ps.UserTime() + ps.SystemTime()
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
