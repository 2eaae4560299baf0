package soak

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tally counts every answer by operation and status, and keeps the first
// few that were not expected.
type tally struct {
	mu         sync.Mutex
	counts     map[string]map[int]int // op -> status (0: transport error) -> n
	unexpected []string
	nUnexp     int
	transport  []string
	nTransport int
	checks     []string // failed content checks
	nChecks    int
}

func newTally() *tally { return &tally{counts: map[string]map[int]int{}} }

func (t *tally) add(op string, status int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.counts[op]
	if m == nil {
		m = map[int]int{}
		t.counts[op] = m
	}
	m[status]++
}

func (t *tally) badStatus(op string, status int, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nUnexp++
	if len(t.unexpected) < 30 {
		t.unexpected = append(t.unexpected, fmt.Sprintf("%s: %d %s", op, status, clip(detail, 300)))
	}
}

func (t *tally) transportErr(op string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nTransport++
	if len(t.transport) < 30 {
		t.transport = append(t.transport, fmt.Sprintf("%s: %v", op, err))
	}
}

// checkFailed records a content check that failed (wrong bytes, a bad
// signature, an impossible state).
func (t *tally) checkFailed(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nChecks++
	if len(t.checks) < 30 {
		t.checks = append(t.checks, fmt.Sprintf(format, args...))
	}
}

func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, m := range t.counts {
		for _, c := range m {
			n += c
		}
	}
	return n
}

func (t *tally) count(op string, status int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[op][status]
}

// table renders the counts, one line per operation.
func (t *tally) table() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ops := make([]string, 0, len(t.counts))
	for op := range t.counts {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "| %-28s | %7s | %s |\n", "operation", "total", "by status")
	fmt.Fprintf(&b, "|%s|%s|%s|\n", strings.Repeat("-", 30), strings.Repeat("-", 9), strings.Repeat("-", 30))
	grand := 0
	for _, op := range ops {
		var statuses []int
		n := 0
		for s, c := range t.counts[op] {
			statuses = append(statuses, s)
			n += c
		}
		sort.Ints(statuses)
		var parts []string
		for _, s := range statuses {
			name := strconv.Itoa(s)
			if s == 0 {
				name = "transport-error"
			}
			parts = append(parts, fmt.Sprintf("%s: %d", name, t.counts[op][s]))
		}
		grand += n
		fmt.Fprintf(&b, "| %-28s | %7d | %s |\n", op, n, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "| %-28s | %7d | |\n", "**all**", grand)
	return b.String()
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// sample is the founder's state at one moment.
type sample struct {
	at         time.Duration // since traffic started; negative: before
	label      string
	vmRSS      int64   // bytes, /proc/PID/status VmRSS
	rssAnon    int64   // bytes, RssAnon: heap, stacks (no file pages)
	rssFile    int64   // bytes, RssFile: mapped files (bbolt's mmap, the binary)
	fds        int     // entries of /proc/PID/fd
	goroutines int     // go_goroutines
	liveHeap   int64   // go_memstats_next_gc_bytes / 2: the heap marked live at the last GC
	heapInuse  int64   // go_memstats_heap_inuse_bytes
	waiters    int     // stratum_join_waiters
	inFlight   int     // stratum_release_reads_in_flight
	requests   int     // answers counted so far
	cpu        float64 // process_cpu_seconds_total
}

// readProc reads the memory lines of /proc/PID/status and counts its fds.
func readProc(pid int) (vmRSS, anon, file int64, fds int, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			vmRSS = n << 10
		case "RssAnon":
			anon = n << 10
		case "RssFile":
			file = n << 10
		}
	}
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	return vmRSS, anon, file, len(ents), err
}

// parseMetrics reads unlabelled gauges and counters of the Prometheus text.
func parseMetrics(text string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// sampleTable renders the samples.
func sampleTable(samples []sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %-9s | %-10s | %8s | %8s | %8s | %9s | %5s | %10s | %7s | %5s | %9s | %7s |\n",
		"t", "phase", "VmRSS", "RssAnon", "RssFile", "live heap", "fds", "goroutines", "waiters", "reads", "answers", "CPU s")
	fmt.Fprintf(&b, "|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", dashes(11), dashes(12), dashes(10), dashes(10), dashes(10), dashes(11), dashes(7), dashes(12), dashes(9), dashes(7), dashes(11), dashes(9))
	for _, s := range samples {
		fmt.Fprintf(&b, "| %-9s | %-10s | %6.1f M | %6.1f M | %6.1f M | %7.1f M | %5d | %10d | %7d | %5d | %9d | %7.1f |\n",
			fmtDur(s.at), s.label, mib(s.vmRSS), mib(s.rssAnon), mib(s.rssFile), mib(s.liveHeap), s.fds, s.goroutines, s.waiters, s.inFlight, s.requests, s.cpu)
	}
	return b.String()
}

func dashes(n int) string { return strings.Repeat("-", n) }

func fmtDur(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%s%dm%02ds", sign, int(d.Minutes()), int(d.Seconds())%60)
}

// fit is a least-squares line through (minutes, value).
type fit struct {
	slope  float64 // units per minute
	r2     float64
	span   float64 // minutes covered
	points int
}

func linearFit(xs, ys []float64) fit {
	n := float64(len(xs))
	if len(xs) < 3 {
		return fit{points: len(xs)}
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return fit{points: len(xs)}
	}
	slope := (n*sxy - sx*sy) / den
	icept := (sy - slope*sx) / n
	mean := sy / n
	var ssTot, ssRes float64
	for i := range xs {
		ssTot += (ys[i] - mean) * (ys[i] - mean)
		r := ys[i] - (icept + slope*xs[i])
		ssRes += r * r
	}
	r2 := 1.0
	if ssTot > 0 {
		r2 = 1 - ssRes/ssTot
	}
	return fit{slope: slope, r2: r2, span: xs[len(xs)-1] - xs[0], points: len(xs)}
}

// trendRule fails a series whose fitted growth is both faster than rate
// per minute and larger than allowance over the fitted window: a slow
// drift too small to matter in a day, or a bounded wobble (a GC cycle, a
// burst of long-polls) that a short window turns into a steep slope, do
// not fail; a steady climb does.
type trendRule struct {
	name      string
	unit      string
	scale     float64 // divides the raw value for display and thresholds
	rate      float64 // per minute, in unit
	allowance float64 // over the window, in unit
	value     func(sample) float64
}

type trendResult struct {
	rule   trendRule
	fit    fit
	growth float64 // slope * span
	fail   bool
}

func (r trendResult) String() string {
	verdict := "ok"
	if r.fail {
		verdict = "GROWING"
	}
	return fmt.Sprintf("%-10s slope %+8.3f %s/min over %4.1f min (%d samples, R² %.2f) = %+8.2f %s; limit: > %.2f %s/min and > %.1f %s -> %s",
		r.rule.name, r.fit.slope, r.rule.unit, r.fit.span, r.fit.points, r.fit.r2, r.growth, r.rule.unit,
		r.rule.rate, r.rule.unit, r.rule.allowance, r.rule.unit, verdict)
}

func (rule trendRule) apply(samples []sample) trendResult {
	var xs, ys []float64
	for _, s := range samples {
		xs = append(xs, s.at.Minutes())
		ys = append(ys, rule.value(s)/rule.scale)
	}
	f := linearFit(xs, ys)
	res := trendResult{rule: rule, fit: f, growth: f.slope * f.span}
	res.fail = f.points >= 3 && f.slope > rule.rate && res.growth > rule.allowance
	if math.IsNaN(f.slope) {
		res.fail = true
	}
	return res
}
