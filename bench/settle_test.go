package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// settle waits, at most settleMax, for the machine to be quiet before a
// rate or a server's CPU is measured: it has the kernel write what the
// benchmarks before it wrote (sync(2)), then waits until the CPUs were
// settleIdle idle over one settleStep. make bench runs every benchmark in
// one process, one after the other, and a figure could be taken while the
// kernel still tears down the rack's 50 network namespaces or writes back
// the gigabytes the mirror and the release set wrote: in one run the
// release records cost 340 us of CPU each against 254-275 in the runs
// around it, and recording them again right after cost what it always
// does. A machine that stays busy longer is measured busy; settle says
// how long it waited and what it saw.
func settle(b *testing.B) {
	b.Helper()
	start := time.Now()
	syscall.Sync()
	idle := -1.0
	for time.Since(start) < settleMax {
		if idle = idleShare(settleStep); idle >= settleIdle || idle < 0 {
			break
		}
	}
	b.Logf("settle: sync and %v to a quiet machine (CPUs %.0f%% idle over %v; load average %s)",
		time.Since(start).Round(10*time.Millisecond), 100*idle, settleStep, loadAvg())
}

const (
	settleMax  = 30 * time.Second
	settleStep = 500 * time.Millisecond
	settleIdle = 0.9
)

// idleShare is the share of the CPUs' time spent idle over d (iowait is
// not idle: the disk is busy), from /proc/stat; -1 when it cannot be read.
func idleShare(d time.Duration) float64 {
	idle0, total0, ok0 := cpuTimes()
	time.Sleep(d)
	idle1, total1, ok1 := cpuTimes()
	if !ok0 || !ok1 || total1 <= total0 {
		return -1
	}
	return float64(idle1-idle0) / float64(total1-total0)
}

// cpuTimes is the idle and the total of /proc/stat's "cpu" line, in ticks.
func cpuTimes() (idle, total uint64, ok bool) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i < 8 { // user nice system idle iowait irq softirq steal; guest is in user
			total += v
		}
		if i == 3 {
			idle = v
		}
	}
	return idle, total, true
}
