package releaseset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"stratum/wire"
	"strings"
	"testing"
	"time"
)

// describeCase is a cluster built to show some skew fields and drift
// kinds, with what Describe must find; its full output is a golden file.
type describeCase struct {
	name       string
	in         Input
	recent     int
	consistent bool
	running    string
	skew       []string // fields, in order
	drift      []string // "nodeId kind field", in order
}

func describeCases(t *testing.T) []describeCase {
	return []describeCase{
		seedCase(t),
		{
			name:       "consistent",
			in:         cluster(baseRecord(), baseRecord(), baseRecord()),
			recent:     3,
			consistent: true,
			running:    "0.2.0",
		},
		{
			// n-b runs another stratum-os build; n-c is a dnf node.
			name: "skew-os",
			in: cluster(baseRecord(), with(func(r *wire.Record) {
				r.OS.ImageVersion, r.OS.PrettyName = "0.2.1", "Stratum OS 0.2.1"
				r.OS.Kernel = "6.12.0-211.60.1.el10_2.x86_64"
				r.Bootc.Booted.Digest, r.Bootc.Booted.Version = digest("stratum-os", "0.2.1"), "0.2.1"
			}), with(func(r *wire.Record) {
				r.ImageMode, r.Bootc = false, nil
				r.OS = &wire.OS{PrettyName: "AlmaLinux 10.2 (Purple Lion)", ID: "almalinux", VersionID: "10.2",
					Kernel: "6.12.0-211.56.1.el10_2.x86_64"}
				r.HostBinaries.Source = wire.SourceControlPlaneImage
			})),
			recent:  3,
			running: "0.2.0",
			skew:    []string{wire.SkewOS, wire.SkewImageMode, wire.SkewKernel},
		},
		{
			// n-b's control plane is an older build with an older schema;
			// n-c's host binaries are of mixed builds.
			name: "skew-control-plane",
			in: cluster(baseRecord(), with(func(r *wire.Record) {
				level := 11
				r.ControlPlane.Version, r.ControlPlane.Commit, r.ControlPlane.SchemaLevel = "v0.1.0", "1a2b3c4d", &level
			}), with(func(r *wire.Record) {
				r.HostBinaries.Commit, r.HostBinaries.Stale = wire.CommitMixed, true
			})),
			recent:  3,
			running: "0.2.0",
			skew:    []string{wire.SkewControlPlane, wire.SkewSchema, wire.SkewHostBinaries},
			drift:   []string{"n-c host hostBinaries"},
		},
		{
			// n-b has older openvswitch bits; n-c found its extension but
			// did not merge it, lacks podman and has frr.
			name: "skew-packages",
			in: cluster(baseRecord(), with(func(r *wire.Record) {
				r.Extensions[0].Version = "3.5.1-2.el10s"
				r.Packages[0].Version = "3.5.1-2.el10s"
			}), with(func(r *wire.Record) {
				r.Extensions[0].Merged = false
				r.Packages = []wire.Package{r.Packages[0], {Component: "frr", Name: "frr", Version: "10.1.1-3.el10"}}
			})),
			recent:  3,
			running: "0.2.0",
			skew:    []string{wire.SkewExtensions, "package:frr", "package:openvswitch", "package:podman"},
		},
		driftReportCase(),
		{
			// n-a's host binaries lag the release; n-b has an OS staged.
			name: "drift-host",
			in: cluster(with(func(r *wire.Record) {
				r.HostBinaries = &wire.HostBinaries{Source: wire.SourceOverlay, Commit: "1a2b3c4d", Stale: true, Want: "4298b2fe"}
			}), with(func(r *wire.Record) {
				r.Bootc.Staged = &wire.Deployment{Image: "registry.example.com/stratum-os:0.2.1", Transport: "registry",
					Digest: digest("stratum-os", "0.2.1"), Version: "0.2.1", Architecture: "amd64", SoftRebootCapable: ptr(true)}
			}), baseRecord()),
			recent:  3,
			running: "0.2.0",
			skew:    []string{wire.SkewHostBinaries},
			drift:   []string{"n-a host hostBinaries", "n-b host bootc.staged"},
		},
		{
			// n-a runs another postgres; n-b runs an image nobody pinned
			// (and keeps one with no containers, which is not drift); n-c
			// runs its own control plane build (self) and no nova, which
			// is not drift either.
			name: "drift-pin",
			in: cluster(with(func(r *wire.Record) {
				r.Pins[1].State, r.Pins[1].Running, r.Pins[1].Containers = wire.PinDiffers, ref("postgres", "0.1.0"), 2
			}), with(func(r *wire.Record) {
				r.Unpinned = []wire.Unpinned{{Image: "docker.io/library/busybox:1.36", Containers: 2}, {Image: "quay.io/example/idle:1", Containers: 0}}
			}), with(func(r *wire.Record) {
				r.Pins[0].Running = ref("stratum-controlplane", "0.2.0-dev")
			})),
			recent:  3,
			running: "0.2.0",
			drift:   []string{"n-a pin pins[1]", "n-b pin unpinned[0]"},
		},
	}
}

// seedCase is the seed's example: its node (the founder) and a second
// node whose control plane is another build, so controlPlane skews.
func seedCase(t *testing.T) describeCase {
	req, err := DecodeRecordRequest(seedRecordBody(t))
	if err != nil {
		t.Fatal(err)
	}
	founder := req.Release
	founder.RecordedAt = testNow.Add(-time.Minute)
	// The example leaves imageMode out, but its node has bootc
	// deployments and an imageVersion: it is an image-mode node.
	founder.ImageMode = true
	// Likewise its extension has a version, which only a merged one has.
	founder.Extensions[0].Merged = true
	other := founder
	other.Bootc = &wire.Bootc{Booted: founder.Bootc.Booted, Rollback: founder.Bootc.Rollback}
	other.ControlPlane = &wire.ControlPlane{Version: "v0.0.0-1a2b3c4d", Commit: "1a2b3c4d"}
	return describeCase{
		name: "seed-example",
		in: Input{
			Now: testNow, Node: "n-founder1", ControlPlane: *founder.ControlPlane,
			Members: []string{"n-founder1", "n-b"},
			Records: map[string]Stored{
				"n-founder1": {RunningRelease: req.RunningRelease, Release: founder},
				"n-b":        {RunningRelease: "0.2.0", Release: other},
			},
		},
		recent:  2,
		running: "0.2.0",
		skew:    []string{wire.SkewControlPlane},
		drift:   []string{"n-founder1 host bootc.staged"},
	}
}

// driftReportCase: n-a recorded exactly ten minutes ago (still recent),
// n-b a moment longer ago (stale: its other control plane build and its
// staged OS are shown, not judged), n-c never; n-x is not a member.
func driftReportCase() describeCase {
	a := baseRecord()
	a.RecordedAt = testNow.Add(-RecentWindow)
	b := with(func(r *wire.Record) {
		r.RecordedAt = testNow.Add(-RecentWindow - time.Second)
		r.ControlPlane.Version, r.ControlPlane.Commit = "v0.1.0", "1a2b3c4d"
		r.Bootc.Staged = r.Bootc.Booted
	})
	in := cluster(a, b, nil)
	in.Records["n-b"] = Stored{RunningRelease: "0.1.0", Release: *b}
	in.Records["n-x"] = Stored{RunningRelease: "0.0.1", Release: *baseRecord()}
	return describeCase{
		name:    "drift-report",
		in:      in,
		recent:  1,
		running: "0.1.0",
		drift:   []string{"n-b report ", "n-c report "},
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range describeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			s := Describe(tc.in)
			if s.Summary.Recent != tc.recent || s.Summary.Consistent != tc.consistent || s.RunningRelease != tc.running {
				t.Errorf("recent %d consistent %v running %q, want %d %v %q",
					s.Summary.Recent, s.Summary.Consistent, s.RunningRelease, tc.recent, tc.consistent, tc.running)
			}
			var skew []string
			for _, sk := range s.Summary.Skew {
				skew = append(skew, sk.Field)
			}
			if !slices.Equal(skew, tc.skew) {
				t.Errorf("skew fields %q, want %q", skew, tc.skew)
			}
			var drift []string
			for _, d := range s.Summary.Drift {
				drift = append(drift, fmt.Sprintf("%s %s %s", d.NodeID, d.Kind, d.Field))
			}
			if !slices.Equal(drift, tc.drift) {
				t.Errorf("drift %q, want %q", drift, tc.drift)
			}
			var ids []string
			for _, n := range s.Nodes {
				ids = append(ids, n.NodeID)
			}
			if !slices.Equal(ids, tc.in.Members) {
				t.Errorf("nodes %q, want the members %q", ids, tc.in.Members)
			}
			checkGolden(t, tc.name+".golden.json", marshalIndent(t, s))
		})
	}
}

// TestDescribeSeedExample: every value the seed's example shows is in our
// answer at the same place.
func TestDescribeSeedExample(t *testing.T) {
	var got any
	if err := json.Unmarshal(marshalIndent(t, Describe(seedCase(t).in)), &got); err != nil {
		t.Fatal(err)
	}
	for _, p := range notIn(seedExample(t), got, "") {
		t.Errorf("seed example value missing or different at %s", p)
	}
}

// notIn lists the paths where want has a value got does not.
func notIn(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, notIn(v, g[k], path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, notIn(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
	}
	return nil
}

func TestDescribeAgesByNow(t *testing.T) {
	in := cluster(baseRecord(), baseRecord(), baseRecord())
	rec := in.Records["n-b"]
	rec.Release.RecordedAt = testNow.Add(-RecentWindow)
	in.Records["n-b"] = rec
	if s := Describe(in); s.Nodes[1].Stale || !s.Summary.Consistent {
		t.Fatalf("a record exactly %v old must be recent: %+v", RecentWindow, s.Summary)
	}
	in.Now = in.Now.Add(time.Nanosecond)
	s := Describe(in)
	if !s.Nodes[1].Stale || s.Summary.Recent != 2 || s.Summary.Consistent {
		t.Fatalf("a nanosecond later it must be stale: %+v", s.Summary)
	}
	d := s.Summary.Drift
	if len(d) != 1 || d[0].Kind != wire.DriftReport || !*d[0].Recorded || !*d[0].Stale || !d[0].RecordedAt.Equal(rec.Release.RecordedAt) {
		t.Fatalf("drift %+v, want one stale report with its recordedAt", d)
	}
}

func TestDescribeEmpty(t *testing.T) {
	s := Describe(Input{Now: testNow, Node: "n-a"})
	if s.Summary.Consistent || s.RunningRelease != "" {
		t.Errorf("no members: %+v", s)
	}
	b := marshalIndent(t, s)
	for _, want := range []string{`"skew": []`, `"drift": []`, `"nodes": []`, `"runningRelease": ""`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

func TestDescribeNeverRecorded(t *testing.T) {
	in := cluster(baseRecord(), nil, baseRecord())
	in.Members = append(in.Members, "n-a") // a duplicate is ignored
	s := Describe(in)
	// A node that sent no release runs the cluster's (the seed).
	if len(s.Nodes) != 3 || s.Nodes[1].Recorded || s.Nodes[1].Release != nil || s.RunningRelease == "" || s.Nodes[1].RunningRelease != s.RunningRelease {
		t.Fatalf("nodes %+v", s.Nodes)
	}
	b, _ := json.Marshal(s.Summary.Drift)
	if want := `[{"nodeId":"n-b","kind":"report","recorded":false,"stale":false}]`; string(b) != want {
		t.Errorf("drift %s, want %s (the spec's example entry)", b, want)
	}
	b, _ = json.Marshal(s.Nodes[1])
	if strings.Contains(string(b), "release\"") {
		t.Errorf("a node that never recorded has no release: %s", b)
	}
}

func TestSkewValueOrderAndDisplay(t *testing.T) {
	// Two OS builds share a version label; the majority comes first.
	rebuilt := with(func(r *wire.Record) { r.Bootc.Booted.Digest = digest("stratum-os", "0.2.0", "rebuilt") })
	s := Describe(cluster(rebuilt, baseRecord(), baseRecord()))
	if len(s.Summary.Skew) != 1 {
		t.Fatalf("skew %+v, want os only", s.Summary.Skew)
	}
	v := s.Summary.Skew[0].Values
	if len(v) != 2 || !slices.Equal(v[0].Nodes, []string{"n-b", "n-c"}) || !slices.Equal(v[1].Nodes, []string{"n-a"}) {
		t.Fatalf("values %+v, want [n-b n-c] then [n-a]", v)
	}
	if v[0].Display == v[1].Display || !strings.HasPrefix(v[0].Display, "0.2.0 (sha256:") {
		t.Errorf("displays %q and %q must differ and keep the version", v[0].Display, v[1].Display)
	}
	// A tie keeps member order.
	in := cluster(baseRecord(), with(func(r *wire.Record) { r.OS.Kernel = "k2" }), nil)
	v = Describe(in).Summary.Skew[0].Values
	if v[0].Value != baseRecord().OS.Kernel || v[1].Value != "k2" {
		t.Errorf("tie order %+v, want n-a's value first", v)
	}
}

func TestRunningRelease(t *testing.T) {
	tests := []struct {
		releases map[string]string // member -> its runningRelease
		want     string
	}{
		{map[string]string{}, ""},
		{map[string]string{"n-a": "", "n-b": "not-a-version"}, ""},
		{map[string]string{"n-a": "0.10.0", "n-b": "0.9.0", "n-c": "0.9.0-rc.1"}, "0.9.0-rc.1"},
		{map[string]string{"n-a": "0.10.0", "n-b": "", "n-c": "0.2.0"}, "0.2.0"},
		{map[string]string{"n-a": "1.0.0", "n-x": "0.1.0"}, "1.0.0"}, // n-x is not a member
	}
	for _, tt := range tests {
		in := Input{Members: []string{"n-a", "n-b", "n-c"}, Records: map[string]Stored{}}
		for id, r := range tt.releases {
			in.Records[id] = Stored{RunningRelease: r}
		}
		if got := RunningRelease(in); got != tt.want {
			t.Errorf("RunningRelease(%v) = %q, want %q", tt.releases, got, tt.want)
		}
		if got := Describe(in).RunningRelease; got != tt.want {
			t.Errorf("Describe(%v).RunningRelease = %q, want %q", tt.releases, got, tt.want)
		}
	}
}
