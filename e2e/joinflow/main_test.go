// Package joinflow runs the founder and `stratum join` as separate
// processes on loopback: the self-upgrade, the delivery and the TPM seal,
// as an operator would see them.
package joinflow

import (
	"os"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

func TestMain(m *testing.M) { os.Exit(stratumtest.Main(m)) }

// run runs the binary to completion and returns its output (stdout, then
// stderr) and exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	r := stratumtest.Run(t, nil, args...)
	return r.Stdout + r.Stderr, r.Code
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	return stratumtest.MustRun(t, args...)
}

// founder is a `stratum serve` child process and its admin's client.
type founder struct {
	*stratumtest.Founder
	admin *stratumtest.Client
}

// startFounder serves dir (initialized) with extra flags; the founder
// must stop on SIGINT within 20 s when the test ends.
func startFounder(t *testing.T, dir string, extra ...string) *founder {
	t.Helper()
	sf := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dir, Args: extra})
	t.Cleanup(func() {
		select {
		case <-sf.Exited():
		default:
			sf.Stop(os.Interrupt, 20*time.Second)
		}
	})
	return &founder{Founder: sf, admin: sf.Admin(t)}
}

// log is everything the founder wrote.
func (f *founder) log() string { return f.Stdout() + f.Stderr() }

// do calls the admin API as the bootstrap admin and checks the status.
func (f *founder) do(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	f.admin.Must(t, method, path, body, want, out)
}
