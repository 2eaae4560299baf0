package labtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ipBatch runs iproute2 commands (without the leading "ip") in one
// process; the first that fails stops the rest. Commands after "-n", NS
// run in namespace NS.
func ipBatch(cmds ...string) error {
	args := []string{"-batch", "-"}
	if len(cmds) > 2 && cmds[0] == "-n" {
		args, cmds = []string{"-n", cmds[1], "-batch", "-"}, cmds[2:]
	}
	cmd := exec.Command("ip", args...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -batch: %v\n%s\ncommands:\n%s", err, out, strings.Join(cmds, "\n"))
	}
	return nil
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Cut takes the host's link down: from now on nothing crosses it either
// way, as when a cable is pulled. Restore brings it back.
func (h *Host) Cut(t testing.TB) {
	t.Helper()
	if err := run("ip", "link", "set", h.Link, "down"); err != nil {
		t.Fatal(err)
	}
}

// Restore brings the host's link back up.
func (h *Host) Restore(t testing.TB) {
	t.Helper()
	if err := run("ip", "link", "set", h.Link, "up"); err != nil {
		t.Fatal(err)
	}
}

// Slow shapes the host's link both ways with a token bucket (tc tbf; netem
// is not available here, so no latency can be added, only a rate): rate
// as tc spells it (100mbit, 1gbit), burst in bytes, packets queued at most
// latency. Unslow removes it.
func (h *Host) Slow(t testing.TB, rate string, burst int, latency time.Duration) {
	t.Helper()
	args := []string{"qdisc", "replace", "dev", "", "root", "tbf", "rate", rate, "burst", strconv.Itoa(burst), "latency", fmt.Sprintf("%dms", max(1, latency.Milliseconds()))}
	// Towards the host: the bridge's end; from the host: eth0 inside.
	args[3] = h.Link
	if err := run("tc", args...); err != nil {
		t.Fatal(err)
	}
	args[3] = "eth0"
	if err := run("tc", append([]string{"-n", h.NS}, args...)...); err != nil {
		t.Fatal(err)
	}
}

// Unslow removes what Slow set.
func (h *Host) Unslow(t testing.TB) {
	t.Helper()
	if err := run("tc", "qdisc", "del", "dev", h.Link, "root"); err != nil {
		t.Fatal(err)
	}
	if err := run("tc", "-n", h.NS, "qdisc", "del", "dev", "eth0", "root"); err != nil {
		t.Fatal(err)
	}
}

// sweep removes the namespaces, links and bridges of labs whose owner
// process is gone (a run that crashed or was killed before its cleanup),
// the processes still running in them first.
func sweep(t testing.TB) {
	unlock, err := lock()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	stale := map[string]bool{}
	for _, id := range labIDs() {
		if _, alive := readOwner(id); !alive {
			stale[id] = true
		}
	}
	for id := range stale {
		t.Logf("labtest: removing lab %s, left by a run that ended without its cleanup", id)
		if err := removeLab(id); err != nil {
			t.Errorf("labtest: %v", err)
		}
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "stl"+id+"-*"))
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
		release(id)
	}
}

// labIDs are the ids of the labs whose namespaces, links or owner files
// exist.
func labIDs() []string {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if len(id) == 5 && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, ns := range namespaces() {
		if rest, ok := strings.CutPrefix(ns, "stl"); ok && len(rest) > 6 && rest[5] == '-' {
			add(rest[:5])
		}
	}
	for _, link := range links() {
		for _, prefix := range []string{"stlb", "stlv"} {
			if rest, ok := strings.CutPrefix(link, prefix); ok && len(rest) >= 5 {
				add(rest[:5])
			}
		}
	}
	entries, _ := os.ReadDir(ownerDir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			add(e.Name())
		}
	}
	return ids
}

// removeLab kills the processes in lab id's namespaces, deletes the
// namespaces (their veths go with them), any veth end left on this side
// and the bridge.
func removeLab(id string) error {
	var errs []string
	for _, ns := range namespaces() {
		if !strings.HasPrefix(ns, "stl"+id+"-") {
			continue
		}
		killIn(ns)
		if err := run("ip", "netns", "delete", ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, link := range links() {
		if link == "stlb"+id || strings.HasPrefix(link, "stlv"+id) {
			if err := run("ip", "link", "delete", link); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// killIn kills every process in namespace ns and waits (2 s at most) for
// them to go.
func killIn(ns string) {
	pids := func() []int {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		var ps []int
		for _, f := range strings.Fields(string(out)) {
			if p, err := strconv.Atoi(f); err == nil {
				ps = append(ps, p)
			}
		}
		return ps
	}
	for _, p := range pids() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(2 * time.Second); len(pids()) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

func namespaces() []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var ns []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			ns = append(ns, f[0])
		}
	}
	return ns
}

// links are the names of this namespace's links ("name@peer" trimmed).
func links() []string {
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	var names []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	return names
}

// Listen opens a listener inside the host's namespace (address as
// net.Listen takes it, e.g. ":7000"), for a test's own service on a host:
// a socket belongs to the namespace it was made in, so it is made on a
// thread moved into the namespace for that one call. It is closed when the
// test ends.
func (h *Host) Listen(t testing.TB, network, address string) net.Listener {
	t.Helper()
	ln, err := h.inNamespace(func() (net.Listener, error) { return net.Listen(network, address) })
	if err != nil {
		t.Fatalf("%s: listen %s %s: %v", h.Name, network, address, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// inNamespace runs make on an OS thread in the host's network namespace.
func (h *Host) inNamespace(open func() (net.Listener, error)) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread is never unlocked: if it could not be moved back,
		// it ends with this goroutine instead of serving others.
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer own.Close()
		target, err := os.Open(filepath.Join("/run/netns", h.NS))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setns %s: %w", h.NS, err)}
			return
		}
		ln, err := open()
		if rerr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); rerr != nil {
			done <- result{ln, err}
			return
		}
		runtime.UnlockOSThread()
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}
