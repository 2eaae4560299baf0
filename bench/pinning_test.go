package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"stratum/internal/stratumtest"
)

// The pinned form of the server benchmarks: the servers' processes on
// one core and this process (the clients) on the other, so that neither
// takes CPU from the other and a server's figures are what one core of
// its own gives it, nginx's and the founder's alike. The other form
// leaves the scheduler free, as before.
const (
	serverCore = 0
	clientCore = 1
)

// pinSettle is how long a Go process needs to see its new affinity: its
// runtime sets GOMAXPROCS from it (1 on one core), checking at most once
// a second.
const pinSettle = 1500 * time.Millisecond

// canPin says whether the machine has the two cores the pinned form
// needs.
func canPin() bool { return runtime.NumCPU() >= 2 }

// followAffinity gives GOMAXPROCS back to the runtime, which sets it
// from the CPUs the process may use and follows their changes, as in
// `stratum serve`: package testing sets it (for -test.cpu), and a
// GOMAXPROCS set by hand is never changed by the runtime. The servers'
// children call it first, and pinForm for this process.
func followAffinity() { runtime.SetDefaultGOMAXPROCS() }

// pinForm pins every thread of the servers' processes (servers, and
// each one's children: nginx's workers) to serverCore and of this process
// to clientCore, waits for the Go runtimes to follow, and returns the
// undoing, which gives every process all the cores again.
func pinForm(servers ...int) (unpin func(), err error) {
	all := make([]int, runtime.NumCPU())
	for i := range all {
		all[i] = i
	}
	self := os.Getpid()
	set := func(server, client []int) error {
		for _, pid := range processTree(servers...) {
			if err := setAffinity(pid, server); err != nil {
				return err
			}
		}
		return setAffinity(self, client)
	}
	followAffinity()
	unpin = func() { _ = set(all, all) }
	if err := set([]int{serverCore}, []int{clientCore}); err != nil {
		unpin()
		return nil, err
	}
	time.Sleep(pinSettle)
	return unpin, nil
}

// formName is "" for the free form, "-pinned" for the pinned one: the
// suffix of the printed case names.
func formName(pinned bool) string {
	if pinned {
		return "-pinned"
	}
	return ""
}

// setAffinity sets the CPU affinity of every thread of process pid
// (sched_setaffinity is per thread; threads made later inherit it).
func setAffinity(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("sched_setaffinity %d/%d: %w", pid, tid, err)
		}
	}
	return nil
}

// processTree is pids and their children.
func processTree(pids ...int) []int {
	out := append([]int(nil), pids...)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, d := range entries {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		ppid, _, _, ok := stratumtest.ProcStat(p)
		if !ok {
			continue
		}
		for _, parent := range pids {
			if ppid == parent {
				out = append(out, p)
			}
		}
	}
	return out
}
