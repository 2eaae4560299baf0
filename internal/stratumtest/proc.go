package stratumtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"stratum/internal/selfcpu"
)

// What a benchmark reads of a running founder: its CPU time and memory
// from /proc, its /metrics, its log.

// pid is the founder's process id (this process's for an in-process one).
func (f *Founder) pid() int {
	if f.cmd == nil {
		return os.Getpid()
	}
	return f.cmd.Process.Pid
}

// CPU is the founder's user+system CPU time so far: a child's from
// /proc/PID/stat (ticks of USER_HZ, 100 on Linux) while it runs and from
// its exit status after; an in-process founder's is this whole process's
// (its clients' included).
func (f *Founder) CPU() time.Duration {
	user, sys := f.CPUTimes()
	return user + sys
}

// CPUTimes is CPU split into user and system (kernel) time.
func (f *Founder) CPUTimes() (user, sys time.Duration) {
	if f.cmd == nil {
		return selfcpu.Times()
	}
	select {
	case <-f.exited:
		ps := f.cmd.ProcessState
		return ps.UserTime(), ps.SystemTime()
	default:
	}
	return ProcCPU(f.pid())
}

// ProcCPU is process pid's user and system CPU time so far, from
// /proc/PID/stat; zero if unread.
func ProcCPU(pid int) (user, sys time.Duration) {
	_, user, sys, _ = ProcStat(pid)
	return user, sys
}

// ProcStat is process pid's parent and its user and system CPU time so
// far, from /proc/PID/stat (ticks of USER_HZ, 100 on Linux); ok is false
// if it could not be read (the process is gone).
func ProcStat(pid int) (ppid int, user, sys time.Duration, ok bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	// The fields after the command name, which is in parentheses and
	// may hold spaces and parentheses itself: state ppid pgrp session
	// tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
	rest := raw[bytes.LastIndexByte(raw, ')')+1:]
	p := strings.Fields(string(rest))
	if len(p) < 13 {
		return 0, 0, 0, false
	}
	ppid, _ = strconv.Atoi(p[1])
	utime, _ := strconv.ParseInt(p[11], 10, 64)
	stime, _ := strconv.ParseInt(p[12], 10, 64)
	return ppid, time.Duration(utime) * 10 * time.Millisecond, time.Duration(stime) * 10 * time.Millisecond, true
}

// Mem is a process's resident memory from /proc/PID/status, in KiB.
type Mem struct {
	RSS, Anon, File int64
}

// Mem is the founder's resident memory (this process's for an in-process
// founder).
func (f *Founder) Mem() (Mem, error) { return ProcMem(f.pid()) }

// ProcMem reads pid's resident memory from /proc/PID/status.
func ProcMem(pid int) (Mem, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, err
	}
	var m Mem
	fields := map[string]*int64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	for line := range strings.SplitSeq(string(raw), "\n") {
		parts := strings.Fields(line)
		if len(parts) >= 2 && fields[parts[0]] != nil {
			*fields[parts[0]], _ = strconv.ParseInt(parts[1], 10, 64)
		}
	}
	return m, nil
}

// FDLimit is the founder's open-files limit, "soft/hard", from
// /proc/PID/limits ("?" when unread).
func (f *Founder) FDLimit() string {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", f.pid()))
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			if p := strings.Fields(line); len(p) >= 5 {
				return p[3] + "/" + p[4]
			}
		}
	}
	return "?"
}

// Metrics scrapes GET /metrics of the admin API: every sample without
// labels, by name.
func (f *Founder) Metrics() (map[string]float64, error) {
	resp, err := f.Client.Get("https://" + f.API + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}

// LogTail is the last n lines of the founder's output.
func (f *Founder) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(f.Output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// LogCount counts the occurrences of s in the founder's output.
func (f *Founder) LogCount(s string) int { return strings.Count(f.Output(), s) }

// ProcRunTime is the time process pid's threads have spent on a CPU so
// far, user and system together, to the nanosecond: the sum of each
// thread's /proc/PID/task/TID/schedstat, where /proc/PID/stat counts in
// ticks of 10 ms (a twentieth of the CPU of a round of 500
// registrations). A thread that has exited is no longer counted, so it is
// for spans in which the process keeps its threads (a Go server under
// steady load does). A kernel without schedstat gets ProcStat's ticks.
func ProcRunTime(pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var sum time.Duration
	read := false
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // exited since the listing, or no schedstat
		}
		ns, _, _ := strings.Cut(string(raw), " ")
		n, _ := strconv.ParseInt(ns, 10, 64)
		sum, read = sum+time.Duration(n), true
	}
	if !read {
		user, sys := ProcCPU(pid)
		return user + sys
	}
	return sum
}
