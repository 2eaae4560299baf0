package releaseset_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	membership "stratum/cluster"
	"stratum/internal/pgtest"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Two founder replicas on one database: a record made through one is in
// the other's answer at once, though each keeps its own cache.
func TestRecordSeenByTheOtherReplica(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func() *store.DB { return storetest.Open(t, dsn) }
	dbA, dbB := open(), open()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var founder string
	if err := dbA.Update(func(tx *store.Tx) error {
		id, _, _, err := membership.Init(tx, membership.DevDefaults(), true, now)
		founder = id.FounderNodeID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	svc := func(db *store.DB) *releaseset.Service {
		s, err := releaseset.New(releaseset.Config{DB: db, Now: func() time.Time { return now }, Node: founder, ControlPlane: wire.ControlPlane{Version: "v1", Commit: "c1"}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := svc(dbA), svc(dbB)
	body := func(s *releaseset.Service) string {
		ans, err := s.Answer()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := ans.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	for i, release := range []string{"0.2.0", "0.3.0", "0.4.0"} {
		before := body(b) // B has the node's fragment cached
		if err := a.Record("test", founder, wire.RecordRequest{RunningRelease: release, Release: releasesettest.Record(i, 0)}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if got := body(b); got == body(a) && got != before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("record %d through A is not in B's answer:\nA: %.300s\nB: %.300s", i, body(a), body(b))
			}
		}
	}
}

// A member removed through one replica (its record forgotten in the
// removing transaction) is forgotten by the other's cache too: a node
// admitted again under its id starts there with no record.
func TestForgetSeenByTheOtherReplica(t *testing.T) {
	dsn := pgtest.DSN(t)
	dbA, dbB := storetest.Open(t, dsn), storetest.Open(t, dsn)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	founder := initCluster(t, dbA, now)
	const gone = "n-gone0001"
	admitInstalled(t, dbA, gone, now)
	a, b := newSet(t, dbA, now, founder), newSet(t, dbB, now, founder)
	if err := a.Record("test", gone, wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(1, 0)}); err != nil {
		t.Fatal(err)
	}
	// inB: gone is a member in B's set, and recorded.
	inB := func() (member, recorded bool) {
		set, err := b.Describe()
		if err != nil {
			t.Fatal(err)
		}
		n := nodeIn(set, gone)
		return n != nil, n != nil && n.Recorded
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, rec := inB(); rec {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record made through A is not in B's set")
		}
	}
	removeForgetting(t, dbA, gone)
	admitInstalled(t, dbA, gone, now)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if member, rec := inB(); member && !rec {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B still shows the removed member's record for the node admitted again under its id")
		}
	}
}
