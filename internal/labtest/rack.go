package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"
	"stratum/internal/syncbuf"
	"stratum/joiner"
)

// RackOptions shape a rack's joins.
type RackOptions struct {
	// Hosts join (default: every host of the lab); Held are left out of
	// the inventory until Enrollment.Let puts them in.
	Hosts, Held []*Host
	Role        string // the join token's role (default worker)
	Release     string // the release the joiners run (default 0.1.0)
	// SelfUpgrade and ReleaseKeys are the joiners' --self-upgrade and
	// --release-keys; UpgradeHook answers a host's --upgrade-hook.
	SelfUpgrade bool
	UpgradeHook func(*Host) string
	ReleaseKeys string
	// NoAgents starts no agent when a join ends; AgentArgs are more flags
	// of the agents (e.g. --interval).
	NoAgents  bool
	AgentArgs []string
}

// Rack is the joins of a lab's hosts, started at once.
type Rack struct {
	Lab        *Lab
	Enrollment *Enrollment
	Joins      []*Join
	// Started is when the first joiner was started.
	Started time.Time
}

// Join is one host's `stratum join`, then its `stratum agent`.
type Join struct {
	Host *Host
	// Ended is when the joiner exited (zero while it runs).
	Ended time.Time

	cmd   *exec.Cmd
	out   syncbuf.Buffer
	done  chan struct{}
	code  int
	agent *stratumtest.Agent
	err   error // the agent's start
}

// Rack starts every host's joiner at once on the lab's founder, each in
// its own namespace with its own TPM (--tpm), with one join token for
// them all (in a file, never on a command line), after applying the
// inventory that names them (Enroll): the founder approves them by
// itself. A host whose join ends joined starts its agent. Everything is stopped when the
// test ends.
func (l *Lab) Rack(t testing.TB, o RackOptions) *Rack {
	t.Helper()
	f := l.Founder()
	if f == nil {
		t.Fatal("labtest: start the founder (Lab.StartFounder) before the rack")
	}
	hosts := o.Hosts
	if hosts == nil {
		hosts = l.Hosts
	}
	role := o.Role
	if role == "" {
		role = "worker"
	}
	release := o.Release
	if release == "" {
		release = "0.1.0"
	}
	tokenFile := filepath.Join(l.Dir, fmt.Sprintf("token-%d", time.Now().UnixNano()))
	if err := os.WriteFile(tokenFile, []byte(f.Operator(t).JoinTokenUses(t, role, len(hosts))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	osRelease, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		// The joiner's own key, made where it looks for it: the
		// founder's joins are found by it, and a lab without TPMs
		// inventories the machine by it.
		id, err := joiner.LoadOrCreateIdentity(h.State)
		if err != nil {
			t.Fatal(err)
		}
		h.KeyFingerprint = id.Fingerprint
		// The agent reads the node's os-release under its root.
		if err := os.MkdirAll(filepath.Join(h.Root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.Root, "etc/os-release"), osRelease, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &Rack{Lab: l, Enrollment: l.Enroll(t, role, hosts, o.Held)}
	bin := stratumtest.Binary(t)
	t.Cleanup(r.stop)
	r.Started = time.Now()
	for _, h := range hosts {
		args := []string{"join", "--founder", l.JoinAddr(), "--token-file", tokenFile, "--ca-pin", f.Pin, "--release", release,
			"--state-dir", h.State, "--root", h.Root, "--hostname", h.Name, "--mgmt-ip", h.IP.String()}
		if h.TPM != "" {
			args = append(args, "--tpm", h.TPM)
		} else {
			args = append(args, "--tpm", filepath.Join(h.Dir, "no-tpm"), "--insecure-store-unseal-key")
		}
		if o.SelfUpgrade {
			args = append(args, "--self-upgrade", "--upgrade-hook", o.UpgradeHook(h), "--release-keys", o.ReleaseKeys)
		}
		j := &Join{Host: h, done: make(chan struct{})}
		j.cmd = exec.Command("ip", append(append(h.Wrap()[1:], bin), args...)...)
		j.cmd.Env = stratumtest.Env()
		j.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		j.cmd.Stdout, j.cmd.Stderr = &j.out, &j.out
		if err := j.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Joins = append(r.Joins, j)
		go j.watch(l, o)
	}
	return r
}

// watch waits for the joiner and, when it ends joined, starts the agent.
func (j *Join) watch(l *Lab, o RackOptions) {
	err := j.cmd.Wait()
	j.Ended = time.Now()
	j.code = j.cmd.ProcessState.ExitCode()
	if ws, ok := j.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		j.code = -int(ws.Signal())
	}
	if err == nil && !o.NoAgents {
		j.agent, j.err = stratumtest.SpawnAgent(j.Host.Wrap(), l.APIURL(), j.Host.Root, o.AgentArgs...)
	}
	close(j.done)
}

// Done is closed once the joiner has exited (and its agent, if any, was
// started).
func (j *Join) Done() <-chan struct{} { return j.done }

// Code is the joiner's exit code (negative: killed by that signal); it
// waits for the exit.
func (j *Join) Code() int { <-j.done; return j.code }

// Output is what the joiner has written so far.
func (j *Join) Output() string { return j.out.String() }

// Agent is the host's agent once its join ended joined (nil before).
func (j *Join) Agent() *stratumtest.Agent {
	select {
	case <-j.done:
		return j.agent
	default:
		return nil
	}
}

// Took is how long the join ran, from the rack's start.
func (r *Rack) Took(j *Join) time.Duration { <-j.done; return j.Ended.Sub(r.Started) }

// Join is the host's join.
func (r *Rack) Join(h *Host) *Join {
	for _, j := range r.Joins {
		if j.Host == h {
			return j
		}
	}
	return nil
}

// WaitJoined waits until every join has ended joined (exit 0) with its
// agent started, within limit, or fails the test with what the failed or
// unfinished joiners and the founder said. It answers when the last
// joiner exited, from the rack's start.
func (r *Rack) WaitJoined(t testing.TB, limit time.Duration) time.Duration {
	t.Helper()
	deadline := time.After(limit - time.Since(r.Started))
	var last time.Duration
	for _, j := range r.Joins {
		select {
		case <-j.done:
		case <-deadline:
			t.Fatalf("labtest: not every join ended within %v:\n%s\nfounder:\n%s", limit, r.report(), r.Lab.Founder().OutputTail(8<<10))
		}
		if j.code != 0 || j.err != nil {
			t.Fatalf("labtest: %s's join exited %d (agent: %v):\n%s\nfounder:\n%s", j.Host.Name, j.code, j.err, j.Output(), r.Lab.Founder().OutputTail(8<<10))
		}
		last = max(last, j.Ended.Sub(r.Started))
	}
	return last
}

// report is each unfinished or failed join's state and the end of its
// output.
func (r *Rack) report() string {
	var b strings.Builder
	for _, j := range r.Joins {
		select {
		case <-j.done:
			if j.code == 0 {
				continue
			}
			fmt.Fprintf(&b, "== %s exited %d\n", j.Host.Name, j.code)
		default:
			fmt.Fprintf(&b, "== %s still running\n", j.Host.Name)
		}
		out := j.Output()
		fmt.Fprintf(&b, "%s\n", out[max(0, len(out)-1500):])
	}
	return b.String()
}

// AgentsRunning fails the test unless every joined host's agent runs.
func (r *Rack) AgentsRunning(t testing.TB) {
	t.Helper()
	for _, j := range r.Joins {
		a := j.Agent()
		if a == nil {
			continue
		}
		select {
		case <-a.Exited():
			t.Errorf("%s's agent exited:\n%s", j.Host.Name, a.Output())
		default:
		}
	}
}

// stop kills the joiners that still run and every agent.
func (r *Rack) stop() {
	for _, j := range r.Joins {
		_ = j.cmd.Process.Kill()
	}
	var wg sync.WaitGroup
	for _, j := range r.Joins {
		wg.Go(func() {
			<-j.done
			if j.agent != nil {
				j.agent.Kill()
			}
		})
	}
	wg.Wait()
}
