package releaseset_test

import (
	"encoding/json"
	"testing"
	"time"

	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// TestReRecordAuditsOnlyAChange: a node recording the release it recorded
// before adds no audit event; a new release adds one, naming it. (The
// previous release is read from the stored record's lead.)
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

// TestRecordOfAnEarlierBuildIsRead: a record an earlier build stored as
// JSON is in the set as it was, a repeat of its release is not audited
// again, and the node's next record is stored compact.
func TestRecordOfAnEarlierBuildIsRead(t *testing.T) {
	db, _ := storetest.Temp(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	founder := initCluster(t, db, now)
	const node = "n-older001"
	admitInstalled(t, db, node, now)
	older, err := json.Marshal(releaseset.Stored{RunningRelease: "0.1.0", Release: releasesettest.Record(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	records := store.Named("release-records")
	if err := db.Update(func(tx *store.Tx) error { return records.Put(tx, node, older) }); err != nil {
		t.Fatal(err)
	}
	s := newSet(t, db, now, founder)
	set, err := s.Describe()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range set.Nodes {
		if n.NodeID == node {
			found = n.RunningRelease == "0.1.0"
		}
	}
	if !found {
		t.Fatalf("the earlier build's record of %s is not in the set as 0.1.0: %+v", node, set.Nodes)
	}
	audited := len(storetest.AuditEventsOf(t, db, "release.recorded"))
	if err := s.Record("test", node, wire.RecordRequest{RunningRelease: "0.1.0", Release: releasesettest.Record(2, 0)}); err != nil {
		t.Fatal(err)
	}
	if n := len(storetest.AuditEventsOf(t, db, "release.recorded")); n != audited {
		t.Errorf("a repeat of the earlier record's release was audited (%d events, was %d)", n, audited)
	}
	var raw []byte
	if err := db.View(func(tx *store.Tx) error { raw = records.Get(tx, node); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 || raw[0] == '{' {
		t.Fatalf("the next record is stored as JSON again: %.40q", raw)
	}
	if st, err := releaseset.DecodeStored(raw); err != nil || st.RunningRelease != "0.1.0" {
		t.Fatalf("the next record reads back as %q, %v", st.RunningRelease, err)
	}
}
