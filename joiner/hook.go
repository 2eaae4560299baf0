package joiner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// hookStderrTail is how much of a failing hook's stderr the error quotes.
const hookStderrTail = 2048

// runHook runs the upgrade hook as `HOOK <verified-tree-dir> <release>`:
// exec'd directly, never through a shell, so neither the path nor the
// arguments are ever reinterpreted. Exit 0 means the machine now runs (or
// will boot into) the release. Its output goes to ours, so the operator
// sees it; a failure quotes the tail of its stderr.
//
// The hook also gets STRATUM_JOIN_STATE_DIR and STRATUM_JOIN_RELEASE_FILE:
// a hook that reboots the machine and never returns should write the new
// release into that file first, so the joiner started after the reboot
// knows the upgrade is done and only re-registers.
func (j *joiner) runHook(ctx context.Context, tree, rel string) error {
	hook := j.cfg.UpgradeHook
	j.log.printf("running the upgrade hook: %s %s %s", hook, tree, rel)
	cmd := exec.CommandContext(ctx, hook, tree, rel)
	// On SIGTERM the hook gets SIGTERM too, and time to stop cleanly.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Env = append(os.Environ(),
		"STRATUM_JOIN_STATE_DIR="+j.cfg.StateDir,
		"STRATUM_JOIN_RELEASE_FILE="+filepath.Join(j.cfg.StateDir, releaseFile),
	)
	tail := &tailBuffer{max: hookStderrTail}
	out := &lockedWriter{w: j.cfg.Out}
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(out, tail)
	err := cmd.Run()
	if err == nil {
		j.log.printf("the upgrade hook succeeded")
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		msg := strings.TrimSpace(tail.String())
		if msg == "" {
			msg = "no output on stderr"
		}
		return fmt.Errorf("the upgrade hook %s failed (%s): %s", hook, ee.ProcessState, msg)
	}
	return fmt.Errorf("the upgrade hook %s could not run: %w", hook, err)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// lockedWriter serialises the hook's stdout and stderr copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
