// Package joinflow runs the founder and `stratum join` as separate
// processes on loopback: the self-upgrade, the delivery and the TPM seal,
// as an operator would see them.
package joinflow

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stratum-joinflow-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "stratum")
	build := exec.Command("go", "build", "-o", binary, "stratum")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs the binary to completion and returns its combined output.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return string(out), code
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, code := run(t, args...)
	if code != 0 {
		t.Fatalf("stratum %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// cleanEnv drops STRATUM_* so the developer's shell cannot steer a test.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "STRATUM_") {
			env = append(env, e)
		}
	}
	return env
}

// founder is a `stratum serve` child process.
type founder struct {
	cmd      *exec.Cmd
	dir      string
	api      string
	join     string
	pin      string
	token    string
	pool     *x509.CertPool
	client   *http.Client
	mu       sync.Mutex
	output   bytes.Buffer
	exited   chan struct{}
	exitCode int
}

var bannerLine = regexp.MustCompile(`^\s+(admin API|join listener|CA pin):\s+(\S+)`)

func startFounder(t *testing.T, dir string, extra ...string) *founder {
	t.Helper()
	args := append([]string{"serve", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = cleanEnv()
	stdout, _ := cmd.StdoutPipe()
	f := &founder{cmd: cmd, dir: dir, exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{f: f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			f.mu.Lock()
			f.output.WriteString(line + "\n")
			if m := bannerLine.FindStringSubmatch(line); m != nil {
				switch m[1] {
				case "admin API":
					f.api = m[2]
				case "join listener":
					f.join = strings.TrimPrefix(m[2], "https://")
				case "CA pin":
					f.pin = m[2]
				}
			}
			done := f.api != "" && f.join != "" && f.pin != ""
			f.mu.Unlock()
			if done && !signalled {
				signalled = true
				close(ready)
			}
		}
	}()
	go func() {
		cmd.Wait()
		f.exitCode = cmd.ProcessState.ExitCode()
		close(f.exited)
	}()
	select {
	case <-ready:
	case <-f.exited:
		t.Fatalf("founder exited: %s", f.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("founder did not start: %s", f.log())
	}
	t.Cleanup(func() { f.stop(t) })
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	f.pool = pool
	f.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	f.token = f.login(t)
	return f
}

type lockedWriter struct{ f *founder }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.output.Write(p)
}

func (f *founder) log() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.output.String()
}

func (f *founder) stop(t *testing.T) {
	select {
	case <-f.exited:
		return
	default:
	}
	f.cmd.Process.Signal(os.Interrupt)
	select {
	case <-f.exited:
	case <-time.After(20 * time.Second):
		f.cmd.Process.Kill()
		t.Errorf("founder ignored SIGINT")
	}
}

func (f *founder) login(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(f.dir, "bootstrap-credentials.txt"))
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		creds[k] = v
	}
	var out struct{ Token string }
	f.do(t, "POST", "/v1/auth/login", map[string]string{"email": creds["email"], "password": creds["password"]}, 200, &out)
	return out.Token
}

func (f *founder) do(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, f.api+path, rd)
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}
