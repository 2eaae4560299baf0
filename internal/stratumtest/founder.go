package stratumtest

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"stratum/internal/syncbuf"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FounderOptions start a founder.
type FounderOptions struct {
	Dir  string   // the data directory (empty: a new temporary one)
	Dev  bool     // --dev: initialize on first start, loopback allowed
	Args []string // more flags of stratum serve
	// APIAddr and JoinAddr are fixed listener addresses (default
	// 127.0.0.1:0, ephemeral ports).
	APIAddr, JoinAddr string
	// StartTimeout bounds the wait for the banner (default 60 s).
	StartTimeout time.Duration
	Env          []string // more environment variables
	// LogFile, when set, receives the founder's stdout and stderr instead
	// of memory (a long run would not fit); Output reads it back.
	LogFile string
	// StopWithin, when set, makes the end of the test stop the founder
	// with SIGINT and wait up to that long (a clean shutdown), instead of
	// killing it.
	StopWithin time.Duration
	// Serve, when set, runs the founder in this process instead of as a
	// child: the test passes the serve entry point (founder.Serve behind
	// a few lines that fill its Options from InProcess), for a test that
	// sets hooks of those Options, reads the founder's internals, or
	// profiles its code. Args and Env do not apply (the Options are the
	// flags); the Founder and its verbs are the same.
	Serve ServeFunc
	// Wrap, when set, is a command prefix the binary runs under, such as
	// `ip netns exec NS` for a founder in a network namespace (package
	// labtest). The prefix must exec the binary in its own process (as
	// `ip netns exec` does), so that its pid, CPU time and signals are
	// the founder's.
	Wrap []string
}

// Founder is a `stratum serve` child process.
type Founder struct {
	Dir  string
	API  string // host:port of the admin API
	Join string // host:port of the join listener
	Pin  string // the CA pin, sha256:<hex>
	// Pool trusts the founder's CA; Client trusts only it.
	Pool   *x509.CertPool
	Client *http.Client
	// Started is when the process was started.
	Started time.Time

	t        testing.TB
	operator struct {
		sync.Mutex
		c *Client
	}
	cmd      *exec.Cmd
	stdout   syncbuf.Buffer
	stderr   syncbuf.Buffer
	logFile  string
	exited   chan struct{}
	exitCode int
	// cancel stops an in-process founder (nil for a child); serveErr is
	// what its Serve returned.
	cancel   context.CancelFunc
	serveErr error
}

var banner = regexp.MustCompile(`^\s*(admin API|join listener|CA pin):\s+(\S+)`)

// jsonBanner reads the banner of --log-format json: one JSON line.
func jsonBanner(line string) ([3]string, bool) {
	var b struct{ AdminAPI, JoinListener, CAPin string }
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &b) != nil || b.AdminAPI == "" || b.JoinListener == "" || b.CAPin == "" {
		return [3]string{}, false
	}
	return [3]string{strings.TrimPrefix(b.AdminAPI, "https://"), strings.TrimPrefix(b.JoinListener, "https://"), b.CAPin}, true
}

// ErrAddrInUse is Spawn's error when a fixed address is taken.
var ErrAddrInUse = errors.New("address already in use")

// StartFounder spawns a founder (see Spawn; Dir defaults to a temporary
// directory) or fails the test. The founder is killed when the test ends
// if it still runs; a failed test logs the end of its output.
func StartFounder(t testing.TB, o FounderOptions) *Founder {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	f, err := Spawn(o)
	if err != nil {
		t.Fatal(err)
	}
	f.t = t
	t.Cleanup(func() {
		if o.StopWithin > 0 && f.Alive() {
			f.Stop(os.Interrupt, o.StopWithin)
		}
		f.Kill()
		if f.cancel != nil {
			// An in-process founder must shut down cleanly.
			select {
			case <-f.exited:
				if f.serveErr != nil {
					t.Errorf("in-process founder: %v", f.serveErr)
				}
			default:
				t.Errorf("in-process founder did not return within 30 s of its cancellation")
			}
		}
		if t.Failed() {
			t.Logf("founder %s output (last 16 KiB):\n%s", f.Dir, f.OutputTail(16<<10))
		}
		f.Client.CloseIdleConnections()
	})
	return f
}

// Spawn runs stratum serve on o.Dir and waits for the banner that names
// its listeners (o.StartTimeout, 60 s by default): for code without a
// *testing.T, such as a harness that kills and restarts the founder. A
// fixed address taken by another process is ErrAddrInUse.
func Spawn(o FounderOptions) (*Founder, error) {
	if o.Serve != nil {
		return spawnInProcess(o)
	}
	bin, err := build()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--data", o.Dir, "--api-addr", cmp.Or(o.APIAddr, "127.0.0.1:0"), "--join-addr", cmp.Or(o.JoinAddr, "127.0.0.1:0")}
	if o.Dev {
		args = append(args, "--dev")
	}
	cmd := wrapped(o.Wrap, bin, append(args, o.Args...)...)
	cmd.Env = append(Env(), o.Env...)
	// The founder dies with the test process, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	f := &Founder{Dir: o.Dir, cmd: cmd, logFile: o.LogFile, exited: make(chan struct{})}
	var stdout, stderr io.Writer = &f.stdout, &f.stderr
	closeLog := func() {}
	if o.LogFile != "" {
		lf, err := os.Create(o.LogFile)
		if err != nil {
			return nil, err
		}
		stdout, stderr, closeLog = lf, lf, func() { lf.Close() }
	}
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		closeLog()
		return nil, err
	}
	f.Started = time.Now()
	if err := cmd.Start(); err != nil {
		closeLog()
		return nil, err
	}
	ready := make(chan [3]string, 1)
	go func() {
		var got [3]string
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			_, _ = stdout.Write([]byte(line + "\n"))
			if j, ok := jsonBanner(line); ok {
				ready <- j
			} else if m := banner.FindStringSubmatch(line); m != nil {
				v := strings.TrimPrefix(m[2], "https://")
				switch m[1] {
				case "admin API":
					got[0] = v
				case "join listener":
					got[1] = v
				case "CA pin":
					got[2] = v
				}
				if got[0] != "" && got[1] != "" && got[2] != "" {
					ready <- got
					got = [3]string{}
				}
			}
		}
		_, _ = io.Copy(stdout, pipe)
		_ = cmd.Wait()
		closeLog()
		f.exitCode = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			f.exitCode = -int(ws.Signal())
		}
		close(f.exited)
	}()
	timeout := cmp.Or(o.StartTimeout, 60*time.Second)
	select {
	case a := <-ready:
		f.API, f.Join, f.Pin = a[0], a[1], a[2]
	case <-f.exited:
		if strings.Contains(f.Output(), "address already in use") {
			return nil, ErrAddrInUse
		}
		return nil, fmt.Errorf("founder exited (%d) before serving:\n%s", f.exitCode, f.OutputTail(16<<10))
	case <-time.After(timeout):
		f.Kill()
		return nil, fmt.Errorf("founder did not print its listeners within %v:\n%s", timeout, f.OutputTail(16<<10))
	}
	if err := f.UseCA(filepath.Join(f.Dir, "ca.pem")); err != nil {
		f.Kill()
		return nil, err
	}
	return f, nil
}

// UseCA makes Pool and Client trust only the certificates of caFile (the
// data directory's ca.pem at start).
func (f *Founder) UseCA(caFile string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s holds no certificate", caFile)
	}
	f.Pool = pool
	f.Client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.Pool}, MaxIdleConnsPerHost: 8}}
	return nil
}

// Stdout and Stderr are what the founder has written so far (empty with
// a LogFile).
func (f *Founder) Stdout() string { return f.stdout.String() }
func (f *Founder) Stderr() string { return f.stderr.String() }

// Output is everything the founder wrote: its LogFile, or stdout then
// stderr.
func (f *Founder) Output() string {
	if f.logFile != "" {
		b, err := os.ReadFile(f.logFile)
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	return f.Stdout() + f.Stderr()
}

// OutputTail is the last n bytes of Output.
func (f *Founder) OutputTail(n int) string {
	s := f.Output()
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Exited is closed once the process has exited; ExitCode is then its
// code (negative: killed by that signal).
func (f *Founder) Exited() <-chan struct{} { return f.exited }
func (f *Founder) ExitCode() int           { <-f.exited; return f.exitCode }

// Process is the child process (nil for an in-process founder).
func (f *Founder) Process() *os.Process {
	if f.cmd == nil {
		return nil
	}
	return f.cmd.Process
}

// ProcessState is the exited child's state (CPU times, status); it waits
// for the exit (nil for an in-process founder).
func (f *Founder) ProcessState() *os.ProcessState {
	<-f.exited
	if f.cmd == nil {
		return nil
	}
	return f.cmd.ProcessState
}

// Stop signals the founder and waits for it to exit; it returns the exit
// code (negative: killed by that signal) and how long it took, and fails
// the test when it does not exit within.
func (f *Founder) Stop(sig os.Signal, within time.Duration) (int, time.Duration) {
	f.t.Helper()
	code, took, err := f.Signal(sig, within)
	if err != nil {
		f.t.Fatalf("%v:\n%s", err, f.OutputTail(16<<10))
	}
	return code, took
}

// Signal sends sig and waits at most within for the exit, then kills.
// An in-process founder takes any signal as the end of its context.
func (f *Founder) Signal(sig os.Signal, within time.Duration) (code int, took time.Duration, err error) {
	start := time.Now()
	if f.cancel != nil {
		f.cancel()
	} else if err := f.cmd.Process.Signal(sig); err != nil && f.Alive() {
		return 0, 0, err
	}
	select {
	case <-f.exited:
	case <-time.After(within):
		f.Kill()
		return f.exitCode, time.Since(start), fmt.Errorf("founder did not exit within %v of %v", within, sig)
	}
	return f.exitCode, time.Since(start), nil
}

// Kill sends SIGKILL (if it still runs) and waits for the exit; an
// in-process founder is cancelled and waited for (30 s at most: a
// goroutine cannot be killed).
func (f *Founder) Kill() {
	if f.cancel != nil {
		f.cancel()
		select {
		case <-f.exited:
		case <-time.After(30 * time.Second):
		}
		return
	}
	if f.Alive() {
		_ = f.cmd.Process.Kill()
	}
	<-f.exited
}

// Alive reports whether the process has not exited.
func (f *Founder) Alive() bool {
	select {
	case <-f.exited:
		return false
	default:
		return true
	}
}

// Credentials reads the bootstrap admin's bootstrap-credentials.txt.
func (f *Founder) Credentials(t testing.TB) (email, password string) {
	t.Helper()
	email, password, err := ReadCredentials(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return email, password
}

// ReadCredentials reads dataDir/bootstrap-credentials.txt.
func ReadCredentials(dataDir string) (email, password string, err error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "bootstrap-credentials.txt"))
	if err != nil {
		return "", "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "email="); ok {
			email = v
		}
		if v, ok := strings.CutPrefix(line, "password="); ok {
			password = v
		}
	}
	if email == "" || password == "" {
		return "", "", fmt.Errorf("bootstrap-credentials.txt holds no email= and password= lines")
	}
	return email, password, nil
}

// Serve runs `stratum serve` on the initialized data directory dir with
// args, stopped cleanly (SIGINT, 20 s) when the test ends.
func Serve(t testing.TB, dir string, args ...string) *Founder {
	t.Helper()
	return StartFounder(t, FounderOptions{Dir: dir, Args: args, StopWithin: 20 * time.Second})
}

// ServeDev runs `stratum serve --dev` on dir (initialized on first start;
// a new temporary directory when empty) with args, killed when the test
// ends.
func ServeDev(t testing.TB, dir string, args ...string) *Founder {
	t.Helper()
	return StartFounder(t, FounderOptions{Dir: dir, Dev: true, Args: args})
}

// Replica starts another replica of f's cluster on the database dsn, in
// the new data directory dir holding f's data key, as an operator adds a
// founder to an HA cluster (docs/HA.md).
func (f *Founder) Replica(t testing.TB, dir, dsn string, args ...string) *Founder {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(f.Dir, "data.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	return StartFounder(t, FounderOptions{Dir: dir, Args: append([]string{"--store", dsn}, args...)})
}

// Operator is the bootstrap admin's client, logged in at its first use and
// kept: one session per founder, as an operator at a terminal has.
func (f *Founder) Operator(t testing.TB) *Client {
	t.Helper()
	f.operator.Lock()
	defer f.operator.Unlock()
	if f.operator.c == nil {
		f.operator.c = f.Admin(t)
	}
	return f.operator.c
}

// SetOperator makes c the client Operator returns (a restored founder's
// admin, who logs in with the credentials of the founder it came from).
func (f *Founder) SetOperator(c *Client) {
	f.operator.Lock()
	f.operator.c = c
	f.operator.Unlock()
}
