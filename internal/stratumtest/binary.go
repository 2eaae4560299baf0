package stratumtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"stratum/internal/pgtest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// Main builds the binary, runs the tests and removes the build: the
// TestMain of a package that drives the binary returns os.Exit(Main(m)).
func Main(m *testing.M) int {
	if _, err := build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(buildDir)
	return pgtest.Main(m) // stops the PostgreSQL a test started

}

// Binary is the path of the stratum binary, built once per test process
// (statically: CGO_ENABLED=0, as released).
func Binary(t testing.TB) string {
	t.Helper()
	p, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Build builds the binary once per test process and returns its path:
// for code that runs without a *testing.T (a process started from a
// helper goroutine).
func Build() (string, error) { return build() }

func build() (string, error) {
	buildOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "stratum-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "stratum")
		cmd := exec.Command("go", "build", "-o", binPath, "stratum")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building stratum (CGO_ENABLED=0): %v\n%s", err, out)
		}
	})
	return binPath, buildErr
}

// ModuleRoot is the directory holding go.mod above the working directory.
func ModuleRoot() (string, error) {
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
			return "", errors.New("stratumtest: no go.mod above the test directory")
		}
		dir = parent
	}
}

// Env is the environment without STRATUM_* variables, so the developer's
// shell cannot steer a test's flags.
func Env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATUM_") {
			out = append(out, kv)
		}
	}
	return out
}

// Result is a finished command.
type Result struct {
	Code           int
	Stdout, Stderr string
	Took           time.Duration
}

// Run runs the binary to completion with extra environment variables,
// within two minutes (the host may be loaded).
func Run(t testing.TB, extraEnv []string, args ...string) Result {
	t.Helper()
	return RunInput(t, extraEnv, "", args...)
}

// RunInput is Run with stdin, as an operator pasting a key.
func RunInput(t testing.TB, extraEnv []string, stdin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Env = append(Env(), extraEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	default:
		t.Fatalf("stratum %v: %v", args, err)
	}
	return r
}

// MustRun runs the binary and fails the test unless it exits 0; it
// returns stdout and stderr together.
func MustRun(t testing.TB, args ...string) string {
	t.Helper()
	r := Run(t, nil, args...)
	if r.Code != 0 {
		t.Fatalf("stratum %s: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout + r.Stderr
}
