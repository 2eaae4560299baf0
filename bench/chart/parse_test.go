package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	out := `# label: quiet run
BenchmarkReleaseSetScale-2   1   123 ns/op
    targets_test.go:27: target releaseset-record-rate: 4990/s (want >= 5000/s) MISS
target releaseset-record-rate: 4990/s (want >= 5000/s) MISS
register-cpu floor: a bare Go HTTPS server with the join listener's TLS settings, the same 3000 connections: 0.567ms a connection (system 0.033); the founder's registration above it: 0.123ms
target register-cpu-ms: 0.69ms (want <= 0.50ms) MISS
mirror nocache case=full founder_mibs=700 nginx_mibs=760 ratio=0.92
mirror cpu case=full founder_s_per_gib=1.10 nginx_s_per_gib=0.99 efficiency=0.90 client_s_per_gib=0.40/0.41
target mirror-full-nocache: 0.92x (want >= 1.00x) MISS
mirror cache case=full founder_mibs=1100 nginx_mibs=750 ratio=1.46
mirror cpu case=full founder_s_per_gib=0.70 nginx_s_per_gib=0.98 efficiency=1.40 client_s_per_gib=0.40/0.41
target mirror-full-cache: 1.46x (want >= 1.00x) pass

SPEC section 21 targets (CPU: Intel(R) Xeon(R) Processor, load 1.9 1.2 0.8):
target releaseset-record-rate: 5010/s (want >= 5000/s) pass
`
	r, err := parse("f", strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.Label != "quiet run" || r.RegisterFloor != 0.567 || len(r.Targets) != 4 ||
		r.Efficiency["full-nocache"] != 0.90 || r.Efficiency["full-cache"] != 1.40 {
		t.Fatalf("parsed %+v", r)
	}
	for _, c := range []struct {
		name     string
		value    float64
		unit     string
		pass     bool
		headroom float64
	}{
		{"releaseset-record-rate", 5010, "/s", true, 1.002}, // the repeated line at the end wins
		{"register-cpu-ms", 0.69, "ms", false, 0.5 / 0.69},
		{"mirror-full-cache", 1.46, "x", true, 1.46},
	} {
		got, ok := r.target(c.name)
		if !ok || got.Value != c.value || got.Unit != c.unit || got.Pass != c.pass || !near(got.headroom(), c.headroom) {
			t.Errorf("%s: %+v (headroom %v), want value %v%s pass=%v headroom %v", c.name, got, got.headroom(), c.value, c.unit, c.pass, c.headroom)
		}
	}
}

func TestParseRefusesAMangledTarget(t *testing.T) {
	for _, line := range []string{
		"target register-cpu-ms: 0.69ms (want <= 0.50x) MISS", // units differ
		"target register-cpu-ms: 0.69ms (want <= 0ms) MISS",   // no limit
	} {
		if _, err := parse("f", strings.NewReader(line+"\n")); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}

// TestChartsFromRecordedRuns draws every chart from the runs kept in
// docs/performance/runs, as make charts does.
func TestChartsFromRecordedRuns(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "performance", "runs", "*.out"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded runs: %v", err)
	}
	var runs []run
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := parse(f, strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	dir := t.TempDir()
	written, err := drawAll(runs, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The recorded runs keep their mirror cpu lines: mirror-cpu.svg too.
	if len(written) != 5 || filepath.Base(written[4]) != "mirror-cpu.svg" {
		t.Fatalf("wrote %v, want the five charts", written)
	}
	for _, f := range written {
		svg, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(svg), "<svg") {
			t.Errorf("%s: not an SVG (%v)", f, err)
		}
	}
}

// TestMirrorCPUChart: a run with mirror cpu lines gets the fifth chart.
func TestMirrorCPUChart(t *testing.T) {
	r, err := parse("run", strings.NewReader(`mirror cache case=range64k founder_mibs=500 nginx_mibs=520 ratio=0.96
mirror cpu case=range64k founder_s_per_gib=1.9 nginx_s_per_gib=1.4 efficiency=0.74 client_s_per_gib=1/1 founder_us_per_req=120 nginx_us_per_req=88
target mirror-range64k-cache: 0.96x (want >= 0.80x) pass
`))
	if err != nil {
		t.Fatal(err)
	}
	written, err := drawAll([]run{r}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 3 || filepath.Base(written[2]) != "mirror-cpu.svg" {
		t.Fatalf("wrote %v, want targets, mirror and mirror-cpu", written)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
