package joiner

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest/fakefounder"
)

// testConfig is a joiner configuration for f with fast timings.
func testConfig(t *testing.T, f *fakefounder.Founder, out io.Writer) Config {
	t.Helper()
	return Config{
		Founder:     f.Addr(),
		Token:       f.Token,
		CAPin:       f.CA.Pin(),
		Release:     f.ClusterRelease,
		StateDir:    t.TempDir(),
		Root:        t.TempDir(),
		TPMPath:     filepath.Join(t.TempDir(), "no-tpm"),
		Hostname:    "lab-2",
		MgmtIP:      "192.0.2.12",
		Out:         out,
		pollWait:    time.Second,
		backoffBase: 20 * time.Millisecond,
		backoffMax:  200 * time.Millisecond,
		stallAfter:  5 * time.Second,
	}
}

// runJoiner runs the joiner with a deadline, so a hang fails the test.
func runJoiner(t *testing.T, cfg Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Run(ctx, cfg)
}

func contains(t *testing.T, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
