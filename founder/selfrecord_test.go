package founder

import (
	"os/exec"
	"testing"
	"time"

	"stratum/hostrecord"
	"stratum/internal/stratumtest"
	"stratum/store"
	"stratum/wire"
)

// TestOwnRecord: the founder's own record carries every schema level it
// knows, its host binaries with the build they should be (its own), and
// the host's os-release and kernel through the agent's collectors.
func TestOwnRecord(t *testing.T) {
	// In this process: its build is commit abcdef12.
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true, Serve: serveIn(nil)})
	set := ownRecord(t, f)
	rec := set.Nodes[0].Release
	cp := rec.ControlPlane
	if cp == nil || cp.Commit != "abcdef12" || cp.SchemaLevel == nil || *cp.SchemaLevel != store.SchemaVersion() ||
		cp.CompatSchemaLevel == nil || *cp.CompatSchemaLevel != store.CompatSchemaVersion() || cp.DatabaseSchemaLevel == nil || *cp.DatabaseSchemaLevel != store.SchemaVersion() {
		t.Fatalf("controlPlane: %+v", cp)
	}
	if set.ControlPlane.CompatSchemaLevel == nil || set.ControlPlane.DatabaseSchemaLevel == nil {
		t.Fatalf("the set's controlPlane: %+v", set.ControlPlane)
	}
	hb := rec.HostBinaries
	if hb == nil || hb.Commit != "abcdef12" || hb.Stale || (hb.Want != "abcdef12" && !rec.ImageMode) {
		t.Fatalf("hostBinaries: %+v", hb)
	}
	if rec.OS == nil || rec.OS.Kernel == "" || rec.HostReportedAt == nil {
		t.Fatalf("os: %+v", rec.OS)
	}
}

// TestOwnRecordPackages: serve --packages records the founder host's own
// packages as an agent's --packages does (SPEC 19), so a cluster whose
// agents report a package can be consistent.
func TestOwnRecordPackages(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		if _, err := exec.LookPath("rpm"); err != nil {
			t.Skip("neither dpkg-query nor rpm on this host: no package to record")
		}
	}
	specs, err := hostrecord.ParsePackages("base=base-files|filesystem")
	if err != nil {
		t.Fatal(err)
	}
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true, Serve: serveIn(func(o *Options) { o.Packages = specs })})
	pk := ownRecord(t, f).Nodes[0].Release.Packages
	if len(pk) != 1 || pk[0].Component != "base" || pk[0].Version == "" {
		t.Fatalf("the founder's packages: %+v", pk)
	}
}

// ownRecord waits until the founder recorded its own release.
func ownRecord(t *testing.T, f *stratumtest.Founder) wire.ReleaseSet {
	t.Helper()
	var set wire.ReleaseSet
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &set)
		if len(set.Nodes) > 0 && set.Nodes[0].Recorded || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(set.Nodes) == 0 || set.Nodes[0].Release == nil {
		t.Fatalf("the founder did not record itself: %+v", set)
	}
	return set
}
