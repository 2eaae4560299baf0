package releaseset

import (
	"stratum/wire"
	"testing"
	"time"
)

// TestBehindAndRoles: a node on a release older than the admission
// release is behind; a record with no control plane (a worker) is not
// skew on controlPlane or schema; the head line and Healthy say so.
func TestBehindAndRoles(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	level := 9
	cp := &wire.ControlPlane{Version: "v1", Commit: "c1", SchemaLevel: &level}
	rec := func(withCP bool) wire.Record {
		r := wire.Record{RecordedAt: now, OS: &wire.OS{PrettyName: "Debian 12", Kernel: "6.1"}, PackageManager: "dpkg"}
		if withCP {
			r.ControlPlane = cp
		}
		return r
	}
	in := Input{Now: now, Node: "n-a", AdmissionRelease: "0.2.0", Members: []string{"n-a", "n-b", "n-c"},
		Records: map[string]Stored{"n-a": {RunningRelease: "0.2.0", Release: rec(true)}, "n-b": {RunningRelease: "0.1.0", Release: rec(false)}, "n-c": {RunningRelease: "0.2.0+build", Release: rec(false)}}}
	s := Describe(in)
	if s.AdmissionRelease != "0.2.0" || s.Nodes[0].Behind || !s.Nodes[1].Behind || s.Nodes[2].Behind {
		t.Fatalf("behind: %+v", s.Nodes)
	}
	for _, sk := range s.Summary.Skew {
		if sk.Field == wire.SkewControlPlane || sk.Field == wire.SkewSchema {
			t.Errorf("a node without a control plane made %s skew: %+v", sk.Field, sk)
		}
	}
	if got := HeadLine(s, 3); got != "3 nodes; admission 0.2.0; behind: n-b (0.1.0); skew: runningRelease" {
		t.Errorf("head line %q", got)
	}
	if Healthy(s) {
		t.Error("a set with a node behind is healthy")
	}
	r := in.Records["n-a"].Release
	if v := imageModeValue(&r); v.display != "package (dpkg)" {
		t.Errorf("imageMode display %q", v.display)
	}
}
