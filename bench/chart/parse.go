package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// target is one `target NAME: VALUE (want OP LIMIT) pass|MISS` line of
// `make bench` (bench/targets_test.go's printTarget).
type target struct {
	Name  string
	Value float64
	Unit  string
	Op    string // "<=" or ">="
	Limit float64
	Pass  bool
}

// headroom is how far the figure is on the good side of its limit: above
// 1 the target is met (by that factor), below 1 missed.
func (t target) headroom() float64 {
	if t.Op == ">=" {
		return t.Value / t.Limit
	}
	return t.Limit / t.Value
}

// run is what one `make bench` output holds that the charts draw.
type run struct {
	Label   string
	Targets []target
	// RegisterFloor is the bare TLS server's CPU a connection in ms
	// (the `register-cpu floor:` line), 0 when the run has none.
	RegisterFloor float64
	// Efficiency is nginx's CPU a GiB over the founder's, per mirror case
	// and phase ("full-nocache"), from the `mirror cpu` lines.
	Efficiency map[string]float64
}

func (r run) target(name string) (target, bool) {
	for _, t := range r.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return target{}, false
}

var (
	targetLine = regexp.MustCompile(`^target ([a-z0-9-]+): ([0-9.]+)(\S*) \(want (<=|>=) ([0-9.]+)(\S*)\) (pass|MISS)$`)
	labelLine  = regexp.MustCompile(`^# label: (.+)$`)
	mirrorLine = regexp.MustCompile(`^mirror (nocache|cache) case=([a-z0-9]+) founder_mibs=`)
	cpuLine    = regexp.MustCompile(`^mirror cpu case=([a-z0-9]+) .*\befficiency=([0-9.]+)`)
	floorLine  = regexp.MustCompile(`^register-cpu floor: .*: ([0-9.]+)ms a connection\b`)
)

// parse reads a bench output: every target line, the register floor, the
// mirror's CPU efficiency per case,
// and a `# label: TEXT` line (added by hand) naming the run in the
// legends instead of its file's name; every other line is skipped. A target printed twice keeps its last
// figure (make bench repeats the target lines at its end).
func parse(label string, r io.Reader) (run, error) {
	out := run{Label: label, Efficiency: map[string]float64{}}
	phase := "" // the mirror phase of the lines that follow
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := labelLine.FindStringSubmatch(line); m != nil {
			out.Label = m[1]
			continue
		}
		if m := floorLine.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return run{}, fmt.Errorf("%s:%d: %v", label, n, err)
			}
			out.RegisterFloor = v
			continue
		}
		if m := mirrorLine.FindStringSubmatch(line); m != nil {
			phase = m[1]
			continue
		}
		if m := cpuLine.FindStringSubmatch(line); m != nil && phase != "" {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return run{}, fmt.Errorf("%s:%d: %v", label, n, err)
			}
			out.Efficiency[m[1]+"-"+phase] = v
			continue
		}
		m := targetLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		value, err1 := strconv.ParseFloat(m[2], 64)
		limit, err2 := strconv.ParseFloat(m[5], 64)
		if err1 != nil || err2 != nil || m[3] != m[6] || limit == 0 {
			return run{}, fmt.Errorf("%s:%d: a target line that does not read: %q", label, n, line)
		}
		t := target{Name: m[1], Value: value, Unit: m[3], Op: m[4], Limit: limit, Pass: m[7] == "pass"}
		replaced := false
		for i := range out.Targets {
			if out.Targets[i].Name == t.Name {
				out.Targets[i], replaced = t, true
			}
		}
		if !replaced {
			out.Targets = append(out.Targets, t)
		}
	}
	return out, sc.Err()
}
