// Package tpmtest starts a software TPM for tests of packages that seal to
// a TPM from another process (the joiner runs as its own binary), so they
// need a TPM reachable by path rather than the in-process simulator.
package tpmtest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartSwtpm starts swtpm as a socket TPM (already powered on and started,
// so it is usable at once) and returns the socket path to pass as --tpm or
// to tpm.Open. It stops swtpm and removes its state when the test ends,
// and skips the test when swtpm is not installed.
func StartSwtpm(t testing.TB) (socketPath string) {
	t.Helper()
	return startSwtpm(t, nil)
}

// startSwtpm starts swtpm on a fresh state directory that manufacture,
// when not nil, fills first (as swtpm_setup does).
func startSwtpm(t testing.TB, manufacture func(state string)) (socketPath string) {
	t.Helper()
	bin, err := exec.LookPath("swtpm")
	if err != nil {
		t.Skip("swtpm not installed (apt-get install swtpm swtpm-tools)")
	}
	// Not t.TempDir: unix socket paths are capped at 108 bytes and
	// TempDir embeds the test name.
	dir, err := os.MkdirTemp("", "swtpm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if manufacture != nil {
		manufacture(state)
	}
	sock := filepath.Join(dir, "tpm.sock")
	pidFile := filepath.Join(dir, "swtpm.pid")

	cmd := exec.Command(bin, "socket", "--tpm2",
		"--tpmstate", "dir="+state,
		"--server", "type=unixio,path="+sock,
		"--ctrl", "type=unixio,path="+sock+".ctrl",
		"--flags", "not-need-init,startup-clear",
		"--daemon", "--pid", "file="+pidFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start swtpm: %v\n%s", err, out)
	}
	pid, err := waitPID(pidFile)
	if err != nil {
		t.Fatalf("swtpm: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(pid); err != nil {
			t.Errorf("stop swtpm: %v", err)
		}
	})
	if err := waitDial(sock); err != nil {
		t.Fatalf("swtpm socket: %v", err)
	}
	return sock
}

const startTimeout = 10 * time.Second

// waitPID reads the daemon's pid, which swtpm writes after forking.
func waitPID(pidFile string) (int, error) {
	deadline := time.Now().Add(startTimeout)
	for {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				return pid, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, errors.New("no pid file after " + startTimeout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDial waits until swtpm accepts connections.
func waitDial(sock string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop terminates the daemon by its pid and waits for it to go, so the
// next test never races a dying TPM. swtpm was reparented away from us;
// if nothing reaps it, a zombie counts as gone.
func stop(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return errors.New("swtpm ignored SIGTERM; killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state letter follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
