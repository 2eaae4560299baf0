package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// printTarget prints one SPEC section 21 target line, the form `make bench`
// collects and scripts read:
//
//	target NAME: VALUE (want OP LIMIT) pass|MISS
//
// VALUE and LIMIT carry their unit with no space (12.3ms, 1.05x, 6100/s).
func printTarget(tb testing.TB, name string, value float64, op string, limit float64, unit string) {
	ok := value <= limit
	if op == ">=" {
		ok = value >= limit
	}
	verdict := "pass"
	if !ok {
		verdict = "MISS"
	}
	line := fmt.Sprintf("target %s: %s%s (want %s %s%s) %s", name, num(value), unit, op, num(limit), unit, verdict)
	tb.Log(line)
	fmt.Println(line)
}

// num prints a figure with the digits it needs.
func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// procStatus reads a "Name: value kB" field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return -1
}

// loadAvg is the machine's one-minute load average: the benchmarks share
// the CPUs with whatever else runs, and each figure is printed with it.
func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	if p := strings.Fields(string(raw)); len(p) > 0 {
		return p[0]
	}
	return "?"
}
