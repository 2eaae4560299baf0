package releaseset_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	membership "stratum/cluster"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// TestAnswerEqualsDescribe checks the cached answer against the pure
// Describe+WriteJSON after each kind of change: a record, a new member, a
// record turning stale with no write, and a removed member. Its ETag must
// change exactly when the bytes do.
func TestAnswerEqualsDescribe(t *testing.T) { testAnswerEqualsDescribe(t) }

// TestStreamedAnswerEqualsDescribe is the same for a set over the budget
// of kept entries, whose answer decodes its entries as it is written.
func TestStreamedAnswerEqualsDescribe(t *testing.T) {
	defer releaseset.SetFragmentBudget(1)()
	testAnswerEqualsDescribe(t)
}

// devSet is a release-set service on clock over a new store holding a
// dev cluster and members n-00000001 to n-<members>, made at clock();
// it returns the service, the store and the founder's node id.
func devSet(t *testing.T, clock func() time.Time, members int) (*releaseset.Service, *store.DB, string) {
	t.Helper()
	db, _ := storetest.Temp(t)
	var founder string
	err := db.Update(func(tx *store.Tx) error {
		id, _, _, err := membership.Init(tx, membership.DevDefaults(), true, clock())
		if err != nil {
			return err
		}
		founder = id.FounderNodeID
		for i := 1; i <= members; i++ {
			if _, err := membership.Admit(tx, membership.Member{MemberView: wire.MemberView{NodeID: fmt.Sprintf("n-%08d", i), MgmtIP: "192.0.2.1"}}, clock()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := releaseset.New(releaseset.Config{DB: db, Now: clock, Node: founder, ControlPlane: wire.ControlPlane{Version: "v1", Commit: "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	return svc, db, founder
}

func testAnswerEqualsDescribe(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	svc, db, founder := devSet(t, func() time.Time { return now }, 0)
	admit := func(id string) {
		t.Helper()
		if err := db.Update(func(tx *store.Tx) error {
			_, err := membership.Admit(tx, membership.Member{MemberView: wire.MemberView{NodeID: id, MgmtIP: "192.0.2.1"}}, now)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	record := func(id string, i int) {
		t.Helper()
		r := releasesettest.Record(i, i%3)
		if err := svc.Record("test", id, wire.RecordRequest{RunningRelease: fmt.Sprintf("0.%d.0", 2+i%2), Release: r}); err != nil {
			t.Fatal(err)
		}
	}
	var lastTag string
	var lastBody []byte
	check := func(step string, wantChange bool) {
		t.Helper()
		a, err := svc.Answer()
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := a.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		set, err := svc.Describe()
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := releaseset.WriteSet(&want, set); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%s: cached answer (%d bytes) differs from releaseset.Describe (%d bytes)", step, got.Len(), want.Len())
		}
		if a.Size() != got.Len() {
			t.Fatalf("%s: Size %d, wrote %d", step, a.Size(), got.Len())
		}
		changed := lastTag != a.ETag
		if changed != wantChange {
			t.Fatalf("%s: ETag changed=%v, want %v", step, changed, wantChange)
		}
		if !changed && !bytes.Equal(lastBody, got.Bytes()) {
			t.Fatalf("%s: same ETag %s for different bytes", step, a.ETag)
		}
		lastTag, lastBody = a.ETag, got.Bytes()
	}
	check("empty", true)
	check("unchanged", false)
	for i := 1; i <= 5; i++ {
		admit(fmt.Sprintf("n-%08d", i))
	}
	check("five members admitted", true)
	record(founder, 0)
	record("n-00000001", 1)
	record("n-00000002", 2)
	check("three records", true)
	check("unchanged again", false)
	now = now.Add(4 * time.Minute)
	record("n-00000003", 3)
	check("a fourth record later", true)
	now = now.Add(6*time.Minute + time.Second)
	check("the first three turned stale with no write", true)
	check("stale, unchanged", false)
	record("n-00000001", 4)
	check("a stale node records again", true)
	if err := db.Update(func(tx *store.Tx) error { return membership.Remove(tx, "n-00000002") }); err != nil {
		t.Fatal(err)
	}
	check("a member removed", true)
	// A node that records no release shows the cluster's, which moves
	// when another node records an older one.
	if err := svc.Record("test", "n-00000004", wire.RecordRequest{Release: releasesettest.Record(5, 0)}); err != nil {
		t.Fatal(err)
	}
	check("a record without a release", true)
	if err := svc.Record("test", founder, wire.RecordRequest{RunningRelease: "0.1.0", Release: releasesettest.Record(0, 0)}); err != nil {
		t.Fatal(err)
	}
	check("the cluster's release moved", true)
}

// TestStoredRecordsSurviveBufferReuse: records made at once (sharing
// commits, their stored JSON in pooled buffers reused after each commit)
// are stored as recorded: a service loading them from the store answers
// what the recording one does.
func TestStoredRecordsSurviveBufferReuse(t *testing.T) {
	now := releasesettest.RecordedAt
	clock := func() time.Time { return now }
	svc, db, founder := devSet(t, clock, 40)
	ids := []string{founder}
	for i := 1; i <= 40; i++ {
		ids = append(ids, fmt.Sprintf("n-%08d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			errs <- svc.Record("test", id, wire.RecordRequest{RunningRelease: fmt.Sprintf("0.%d.0", 1+i%3), Release: releasesettest.Record(i, i%3)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	answer := func(s *releaseset.Service) []byte {
		a, err := s.Answer()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	loaded, err := releaseset.New(releaseset.Config{DB: db, Now: clock, Node: founder, ControlPlane: wire.ControlPlane{Version: "v1", Commit: "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := answer(svc), answer(loaded); !bytes.Equal(a, b) {
		t.Fatalf("the answer from the stored records differs from the recorded one:\nrecorded %.300s\nstored   %.300s", a, b)
	}
}
