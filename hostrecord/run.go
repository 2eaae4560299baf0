package hostrecord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Runner runs one of the host's tools and returns its standard output.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ErrMissing: the tool is not installed here.
var ErrMissing = errors.New("not installed")

// ExitError is a tool that ran and exited non-zero; its output is still
// returned (dpkg-query lists what it found and exits 1 for the rest).
type ExitError struct {
	Name   string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s exited %d", e.Name, e.Code)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// maxOutput bounds what a tool may print: a record is at most 4 MiB.
const maxOutput = 4 << 20

// ExecRunner runs tools from PATH.
type ExecRunner struct{}

// Run runs name with args until ctx ends.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, ErrMissing)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxOutput, 4<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No locale surprises in the output we parse.
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	err = cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	if stdout.over {
		return nil, fmt.Errorf("%s printed more than %d bytes", name, maxOutput)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.Bytes(), &ExitError{Name: name, Code: ee.ExitCode(), Stderr: firstLine(stderr.String())}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return stdout.Bytes(), nil
}

type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if b.Len()+len(p) > b.max {
		b.over = true
		p = p[:max(0, b.max-b.Len())]
	}
	b.Buffer.Write(p)
	return n, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
