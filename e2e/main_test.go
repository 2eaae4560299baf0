// Package e2e drives the real stratum binary: it is built once, statically
// (CGO_ENABLED=0), and each test runs it as an operator would.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bin is the stratum binary TestMain built.
var bin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "stratum-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin = filepath.Join(tmp, "stratum")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	build := exec.Command("go", "build", "-o", bin, "stratum")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building stratum (CGO_ENABLED=0): %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// moduleRoot is the directory holding go.mod above the test's directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("e2e: no go.mod above the test directory")
		}
		dir = parent
	}
}

// env is the environment without STRATUM_* twins that would change flags.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATUM_") {
			out = append(out, kv)
		}
	}
	return out
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

// stratum runs the binary to completion.
func stratum(t *testing.T, args ...string) result {
	t.Helper()
	return stratumEnv(t, nil, args...)
}

// stratumEnv runs the binary with extra environment variables.
func stratumEnv(t *testing.T, extra []string, args ...string) result {
	t.Helper()
	return stratumEnvIn(t, extra, "", args...)
}

// stratumIn runs the binary with stdin, as an operator pasting a key.
func stratumIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return stratumEnvIn(t, nil, stdin, args...)
}

func stratumEnvIn(t *testing.T, extra []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(env(), extra...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("stratum %v: %v", args, err)
	}
	return r
}

// syncBuffer collects a child's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// founder is a running `stratum serve`.
type founder struct {
	t        *testing.T
	dir      string
	cmd      *exec.Cmd
	api      string // host:port of the admin API
	join     string // host:port of the join listener
	stdout   *syncBuffer
	stderr   *syncBuffer
	exited   chan struct{}
	exitCode int
	client   *http.Client
}

var (
	apiLine  = regexp.MustCompile(`admin API:\s+https://(\S+)`)
	joinLine = regexp.MustCompile(`join listener:\s+https://(\S+)`)
)

// startFounder runs `stratum serve --dev` on dir with ephemeral ports and
// waits for the banner that names the bound addresses. extra flags are
// added to the command line.
func startFounder(t *testing.T, dir string, extra ...string) *founder {
	t.Helper()
	args := append([]string{"serve", "--dev", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = env()
	f := &founder{t: t, dir: dir, cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = f.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 1)
	go func() {
		var api, join string
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			_, _ = f.stdout.Write([]byte(line + "\n"))
			if m := apiLine.FindStringSubmatch(line); m != nil {
				api = m[1]
			}
			if m := joinLine.FindStringSubmatch(line); m != nil {
				join = m[1]
			}
			if api != "" && join != "" {
				addrs <- [2]string{api, join}
				api, join = "", ""
			}
		}
		_, _ = io.Copy(f.stdout, pipe)
		_ = cmd.Wait()
		f.exitCode = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			f.exitCode = -int(ws.Signal())
		}
		close(f.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-f.exited:
		default:
			_ = cmd.Process.Kill()
			<-f.exited
		}
		if t.Failed() {
			t.Logf("founder %s stdout:\n%s\nstderr:\n%s", dir, f.stdout, f.stderr)
		}
	})
	select {
	case a := <-addrs:
		f.api, f.join = a[0], a[1]
	case <-f.exited:
		t.Fatalf("founder exited (%d) before serving:\n%s\n%s", f.exitCode, f.stdout, f.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("founder did not print its listeners within 30s:\n%s\n%s", f.stdout, f.stderr)
	}
	f.client = clientFor(t, filepath.Join(dir, "ca.pem"))
	return f
}

// clientFor trusts only the CA in caFile.
func clientFor(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		MaxIdleConnsPerHost: 8,
	}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// stop signals the founder and waits for it to exit; it returns the exit
// code (negative: killed by that signal) and how long it took.
func (f *founder) stop(sig os.Signal, within time.Duration) (int, time.Duration) {
	f.t.Helper()
	start := time.Now()
	if err := f.cmd.Process.Signal(sig); err != nil {
		f.t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-f.exited:
	case <-time.After(within):
		f.t.Fatalf("founder did not exit within %v of %v:\n%s", within, sig, f.stderr)
	}
	return f.exitCode, time.Since(start)
}

// call sends a JSON request to the admin API.
func (f *founder) call(method, path, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "https://"+f.api+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// credentials reads bootstrap-credentials.txt.
func credentials(t *testing.T, dir string) (email, password string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "bootstrap-credentials.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "email="); ok {
			email = v
		}
		if v, ok := strings.CutPrefix(line, "password="); ok {
			password = v
		}
	}
	if email == "" || len(password) != 24 {
		t.Fatalf("bootstrap-credentials.txt = %q", b)
	}
	return email, password
}

func (f *founder) login(email, password string) string {
	f.t.Helper()
	status, body, err := f.call("POST", "/v1/auth/login", "", map[string]string{"email": email, "password": password})
	if err != nil || status != 200 {
		f.t.Fatalf("login: %d %s %v", status, body, err)
	}
	var out struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Token == "" {
		f.t.Fatalf("login answer %s", body)
	}
	return out.Token
}

type apiToken struct {
	ID    string `json:"tokenId"`
	Token string `json:"token"`
}

const describeOnly = `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`

func (f *founder) createToken(admin, name string) (apiToken, int, error) {
	status, body, err := f.call("POST", "/v1/iam/tokens", admin, map[string]any{"name": name, "ttl": "1h", "policy": json.RawMessage(describeOnly)})
	if err != nil || status != 201 {
		return apiToken{}, status, err
	}
	var tok apiToken
	if err := json.Unmarshal(body, &tok); err != nil || tok.ID == "" || tok.Token == "" {
		return apiToken{}, status, fmt.Errorf("create token answer %s: %v", body, err)
	}
	return tok, status, nil
}

func (f *founder) tokenIDs(admin string) map[string]bool {
	f.t.Helper()
	status, body, err := f.call("GET", "/v1/iam/tokens", admin, nil)
	if err != nil || status != 200 {
		f.t.Fatalf("list tokens: %d %s %v", status, body, err)
	}
	var out struct {
		Tokens []struct {
			ID string `json:"tokenId"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		f.t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, tk := range out.Tokens {
		ids[tk.ID] = true
	}
	return ids
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestStaticBinary(t *testing.T) {
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
		t.Fatalf("the binary links %v", libs)
	}
	if r := stratum(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "stratum ") {
		t.Fatalf("stratum version = %d %q %q", r.code, r.stdout, r.stderr)
	}
}
