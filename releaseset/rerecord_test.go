package releaseset_test

import (
	"testing"
	"time"

	"stratum/releaseset/releasesettest"
	"stratum/store/storetest"
	"stratum/wire"
)

// TestReRecordAuditsOnlyAChange: a node recording the release it recorded
// before adds no audit event; a new release adds one, naming it. (The
// previous release is read from the stored record's first field.)
func TestReRecordAuditsOnlyAChange(t *testing.T) {
	db, _ := storetest.Temp(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	founder := initCluster(t, db, now)
	const node = "n-again001"
	admitInstalled(t, db, node, now)
	s := newSet(t, db, now, founder)
	for i, running := range []string{"0.2.0", "0.2.0", "0.2.0", "0.3.0", "0.3.0", "0.2.0"} {
		if err := s.Record("test", node, wire.RecordRequest{RunningRelease: running, Release: releasesettest.Record(i, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, ev := range storetest.AuditEventsOf(t, db, "release.recorded") {
		if ev.Subject == node {
			got = append(got, ev.Data["runningRelease"])
		}
	}
	if want := []string{"0.2.0", "0.3.0", "0.2.0"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("release.recorded events of %s: %q, want %q", node, got, want)
	}
}
