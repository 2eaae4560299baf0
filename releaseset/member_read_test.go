package releaseset_test

import (
	"testing"
	"time"

	"stratum/apierr"
	membership "stratum/cluster"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// TestRecordDecidesOnTheMemberAtCommit: a record reads its member before
// the shared commit, so that the commit does not decode it again, but
// what the member is when the commit runs decides: a member removed, or
// put back in its delivery, after that read gets no record, and a member
// changed otherwise still gets one.
func TestRecordDecidesOnTheMemberAtCommit(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const node = "n-moved001"
	tests := []struct {
		name     string
		change   func(t *testing.T, db *store.DB)
		want     apierr.Code // "" for a stored record
		recorded bool
	}{
		{"unchanged", func(*testing.T, *store.DB) {}, "", true},
		{"removed", func(t *testing.T, db *store.DB) { removeForgetting(t, db, node) }, apierr.NotFound, false},
		{"back in its delivery", func(t *testing.T, db *store.DB) {
			putMember(t, db, node, func(m *membership.Member) { m.Installed = false })
		}, apierr.Forbidden, false},
		{"renamed", func(t *testing.T, db *store.DB) {
			putMember(t, db, node, func(m *membership.Member) { m.Hostname = "rack2-07" })
		}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := storetest.Temp(t)
			founder := initCluster(t, db, now)
			admitInstalled(t, db, node, now)
			s := newSet(t, db, now, founder)
			calls := 0
			defer releaseset.SetMemberRead(func(id string) {
				if id == node {
					calls++
					tt.change(t, db)
				}
			})()

			err := s.Record("test", node, wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(1, 0)})
			if calls != 1 {
				t.Fatalf("the member was changed %d times between its read and the commit, want 1", calls)
			}
			if got := apierr.CodeOf(err); tt.want != "" && got != tt.want || tt.want == "" && err != nil {
				t.Fatalf("Record: %v (code %q), want code %q", err, got, tt.want)
			}
			var stored []byte
			if err := db.View(func(tx *store.Tx) error {
				stored = store.Named("release-records").Get(tx, node)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			set, err := s.Describe()
			if err != nil {
				t.Fatal(err)
			}
			n := nodeIn(set, node)
			if (stored != nil) != tt.recorded || (n != nil && n.Recorded) != tt.recorded {
				t.Fatalf("stored record %d bytes, in the set %+v; want recorded=%v", len(stored), n, tt.recorded)
			}
		})
	}
}

// putMember rewrites node's member record with change applied.
func putMember(t *testing.T, db *store.DB, node string, change func(*membership.Member)) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error {
		m, found, err := membership.GetMember(tx, node)
		if err != nil || !found {
			t.Fatalf("member %s: found %v, %v", node, found, err)
		}
		change(&m)
		return membership.PutMember(tx, m)
	}); err != nil {
		t.Fatal(err)
	}
}
