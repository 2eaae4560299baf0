// Package joinflow runs the founder and `stratum join` as separate
// processes on loopback: the self-upgrade, the delivery and the TPM seal,
// as an operator would see them.
package joinflow

import (
	"os"
	"testing"

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
