package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// One colour a run, the same in every chart.
var runColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
}

var limitColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}

func runColor(i int) color.Color { return runColors[i%len(runColors)] }

// drawAll writes every chart the runs have figures for.
func drawAll(runs []run, dir string) ([]string, error) {
	var written []string
	for _, c := range []struct {
		file  string
		chart func([]run) (*plot.Plot, vg.Length, vg.Length, error)
	}{
		{"targets.svg", targetsChart},
		{"mirror.svg", mirrorChart},
		{"releaseset.svg", releaseSetChart},
		{"register.svg", registerChart},
		{"mirror-cpu.svg", mirrorCPUChart},
	} {
		p, w, h, err := c.chart(runs)
		if err != nil {
			return written, fmt.Errorf("%s: %w", c.file, err)
		}
		if p == nil {
			continue // no run has these figures
		}
		file := filepath.Join(dir, c.file)
		if err := p.Save(w, h, file); err != nil {
			return written, err
		}
		written = append(written, file)
	}
	return written, nil
}

// names are the targets any run has, in the order of the first run that
// has each, filtered by keep.
func names(runs []run, keep func(string) bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range runs {
		for _, t := range r.Targets {
			if !seen[t.Name] && keep(t.Name) {
				seen[t.Name] = true
				out = append(out, t.Name)
			}
		}
	}
	return out
}

// groupedBars adds one bar series a run over the named targets, value
// taken by f (NaN-free: a run without the target draws no bar, 0).
func groupedBars(p *plot.Plot, runs []run, targets []string, width vg.Length, horizontal bool, f func(target) float64) error {
	for i, r := range runs {
		vals := make(plotter.Values, len(targets))
		for j, name := range targets {
			if t, ok := r.target(name); ok {
				vals[j] = f(t)
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.Horizontal = horizontal
		bars.Color = runColor(i)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(runs)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(r.Label, bars)
	}
	return nil
}

// limitMarks draws each target's limit as a short red segment across its
// group of bars (vertical bars), with one legend entry.
func limitMarks(p *plot.Plot, limits []float64, label string) error {
	var first *plotter.Line
	for i, v := range limits {
		if v == 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: float64(i) - 0.42, Y: v}, {X: float64(i) + 0.42, Y: v}})
		if err != nil {
			return err
		}
		l.Color = limitColor
		l.Width = vg.Points(2)
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(l)
		if first == nil {
			first = l
		}
	}
	if first != nil {
		p.Legend.Add(label, first)
	}
	return nil
}

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Legend.Top = true
	p.Legend.Left = false
	p.Title.Padding = vg.Points(8)
	p.Add(plotter.NewGrid())
	return p
}

// targetsChart: every target as its headroom (limit over figure for an
// upper bound, figure over limit for a lower one), one dot a run, on a
// log scale, so that every target reads the same way whatever its unit:
// right of the red line it is met.
func targetsChart(runs []run) (*plot.Plot, vg.Length, vg.Length, error) {
	all := names(runs, func(string) bool { return true })
	p := newPlot("SPEC section 21 targets: headroom (right of the line: met)")
	p.X.Label.Text = "limit / figure (at most), figure / limit (at least); log scale"
	p.X.Scale = plot.LogScale{}
	lo, hi := 0.5, 2.0
	for _, r := range runs {
		for _, t := range r.Targets {
			lo, hi = math.Min(lo, t.headroom()*0.8), math.Max(hi, t.headroom()*1.25)
		}
	}
	// The first target at the top.
	row := map[string]float64{}
	rev := make([]string, len(all))
	for i, n := range all {
		row[n] = float64(len(all) - 1 - i)
		rev[len(all)-1-i] = n
	}
	for i, r := range runs {
		var xys plotter.XYs
		for _, t := range r.Targets {
			// Runs side by side within a target's row.
			// The runs' points stay within their target's row.
			dy := min(0.18, 0.8/float64(len(runs))) * (float64(i) - float64(len(runs)-1)/2)
			xys = append(xys, plotter.XY{X: t.headroom(), Y: row[t.Name] - dy})
		}
		dots, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, 0, 0, err
		}
		dots.GlyphStyle.Color = runColor(i)
		dots.GlyphStyle.Radius = vg.Points(4)
		dots.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(dots)
		p.Legend.Add(r.Label, dots)
	}
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.6}, {X: 1, Y: float64(len(all)) - 0.4}})
	if err != nil {
		return nil, 0, 0, err
	}
	one.Color, one.Width = limitColor, vg.Points(1.5)
	p.Add(one)
	p.Legend.Add("the limit", one)
	p.X.Min, p.X.Max = lo, hi
	var ticks []plot.Tick
	for _, v := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100} {
		if v >= lo && v <= hi {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top = false // the bottom right is where the figures are not
	p.Y.Min, p.Y.Max = -0.6, float64(len(all))-0.4
	p.NominalY(rev...)
	return p, 9 * vg.Inch, vg.Length(1.4+0.36*float64(len(all))) * vg.Inch, nil
}

// mirrorChart: the founder's throughput over nginx's for each mirror
// case, with and without the cache, beside each case's target.
func mirrorChart(runs []run) (*plot.Plot, vg.Length, vg.Length, error) {
	cases := names(runs, func(n string) bool { return strings.HasPrefix(n, "mirror-") })
	if len(cases) == 0 {
		return nil, 0, 0, nil
	}
	p := newPlot("Release mirror: the founder's throughput over nginx's")
	p.Y.Label.Text = "founder / nginx (x)"
	p.Y.Min = 0
	if err := groupedBars(p, runs, cases, vg.Points(36/float64(len(runs))), false, func(t target) float64 { return t.Value }); err != nil {
		return nil, 0, 0, err
	}
	if err := limitMarks(p, limitsOf(runs, cases), "target (at least)"); err != nil {
		return nil, 0, 0, err
	}
	fitBars(p, runs, cases)
	p.NominalX(shortNames(cases, "mirror-")...)
	return p, 9 * vg.Inch, 4.5 * vg.Inch, nil
}

// mirrorCPUChart: nginx's CPU a GiB over the founder's for each mirror
// case (the figure the machine's load disturbs least), when the runs
// printed their `mirror cpu` lines.
func mirrorCPUChart(runs []run) (*plot.Plot, vg.Length, vg.Length, error) {
	var cases []string
	seen := map[string]bool{}
	top := 1.0
	for _, r := range runs {
		for _, name := range names([]run{r}, func(n string) bool { return strings.HasPrefix(n, "mirror-") }) {
			c := strings.TrimPrefix(name, "mirror-")
			if _, ok := r.Efficiency[c]; ok && !seen[c] {
				seen[c] = true
				cases = append(cases, c)
			}
		}
		for _, v := range r.Efficiency {
			top = math.Max(top, v)
		}
	}
	if len(cases) == 0 {
		return nil, 0, 0, nil
	}
	p := newPlot("Release mirror: nginx's CPU a GiB over the founder's")
	p.Y.Label.Text = "nginx CPU / founder CPU a GiB"
	p.Y.Min = 0
	w := vg.Points(36 / float64(len(runs)))
	for i, r := range runs {
		vals := make(plotter.Values, len(cases))
		for j, c := range cases {
			vals[j] = r.Efficiency[c]
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, 0, 0, err
		}
		bars.Color, bars.LineStyle.Width = runColor(i), 0
		bars.Offset = vg.Length(float64(i)-float64(len(runs)-1)/2) * w
		p.Add(bars)
		p.Legend.Add(r.Label, bars)
	}
	one, err := plotter.NewLine(plotter.XYs{{X: -0.6, Y: 1}, {X: float64(len(cases)) - 0.4, Y: 1}})
	if err != nil {
		return nil, 0, 0, err
	}
	one.Color, one.Width = limitColor, vg.Points(1.5)
	p.Add(one)
	p.Legend.Add("the same CPU as nginx", one)
	p.X.Min, p.X.Max, p.Y.Max = -0.6, float64(len(cases))-0.4, 1.4*top
	p.NominalX(cases...)
	return p, 9 * vg.Inch, 4.5 * vg.Inch, nil
}

// releaseSetChart: the release set's p99 latencies beside their limits.
func releaseSetChart(runs []run) (*plot.Plot, vg.Length, vg.Length, error) {
	lat := names(runs, func(n string) bool { return strings.HasPrefix(n, "releaseset-") && strings.Contains(n, "-p99-") })
	if len(lat) == 0 {
		return nil, 0, 0, nil
	}
	p := newPlot("Release set: p99 latency of a GET")
	p.Y.Label.Text = "ms"
	p.Y.Min = 0
	if err := groupedBars(p, runs, lat, vg.Points(36/float64(len(runs))), false, func(t target) float64 { return t.Value }); err != nil {
		return nil, 0, 0, err
	}
	if err := limitMarks(p, limitsOf(runs, lat), "target (at most)"); err != nil {
		return nil, 0, 0, err
	}
	fitBars(p, runs, lat)
	p.NominalX(shortNames(lat, "releaseset-")...)
	return p, 7 * vg.Inch, 4.5 * vg.Inch, nil
}

// registerChart: the founder's CPU a registration, the bare TLS server's
// CPU a connection in the same run (the floor), and the target.
func registerChart(runs []run) (*plot.Plot, vg.Length, vg.Length, error) {
	var have []run
	for _, r := range runs {
		if _, ok := r.target("register-cpu-ms"); ok && r.RegisterFloor > 0 {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return nil, 0, 0, nil
	}
	p := newPlot("CPU a registration: the founder and the floor under it")
	p.Y.Label.Text = "ms of CPU"
	p.Y.Min = 0
	founder, floor := make(plotter.Values, len(have)), make(plotter.Values, len(have))
	labels := make([]string, len(have))
	var limit float64
	for i, r := range have {
		t, _ := r.target("register-cpu-ms")
		founder[i], floor[i], labels[i], limit = t.Value, r.RegisterFloor, r.Label, t.Limit
	}
	w := vg.Points(22)
	for i, s := range []struct {
		vals  plotter.Values
		label string
	}{{founder, "the founder: a registration"}, {floor, "a bare Go TLS server: a connection"}} {
		bars, err := plotter.NewBarChart(s.vals, w)
		if err != nil {
			return nil, 0, 0, err
		}
		bars.Color, bars.LineStyle.Width = runColor(i), 0
		bars.Offset = vg.Length(float64(i)-0.5) * w
		p.Add(bars)
		p.Legend.Add(s.label, bars)
	}
	l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: limit}, {X: float64(len(have)) - 0.5, Y: limit}})
	if err != nil {
		return nil, 0, 0, err
	}
	l.Color, l.Width = limitColor, vg.Points(1.5)
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(l)
	p.Legend.Add(fmt.Sprintf("target (at most %gms)", limit), l)
	p.Y.Max = 1.35 * math.Max(limit, maxOf(founder))
	p.NominalX(labels...)
	p.Legend.Left = true
	p.Legend.Padding = vg.Points(2)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p, 6 * vg.Inch, 4 * vg.Inch, nil
}

// fitBars leaves room around a bar chart of the named targets: half a
// group at each end, and above the tallest bar or limit for the legend.
func fitBars(p *plot.Plot, runs []run, targets []string) {
	top := 0.0
	for _, r := range runs {
		for _, name := range targets {
			if t, ok := r.target(name); ok {
				top = math.Max(top, math.Max(t.Value, t.Limit))
			}
		}
	}
	p.X.Min, p.X.Max = -0.6, float64(len(targets))-0.4
	p.Y.Max = 1.4 * top
}

func limitsOf(runs []run, targets []string) []float64 {
	out := make([]float64, len(targets))
	for i, name := range targets {
		for _, r := range runs {
			if t, ok := r.target(name); ok {
				out[i] = t.Limit
			}
		}
	}
	return out
}

func shortNames(names []string, prefix string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimPrefix(n, prefix)
	}
	return out
}

func maxOf(v plotter.Values) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}
