package releaseset

import (
	"testing"
	"time"

	membership "stratum/cluster"
	"stratum/internal/pgtest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// twoReplicas is a cluster on a fresh database opened twice, with a
// loaded release set service on each handle (two founder replicas).
func twoReplicas(t *testing.T) (a, b *Service, dbA, dbB *store.DB, founder, dsn string) {
	t.Helper()
	dsn = pgtest.DSN(t)
	open := func() *store.DB { return storetest.Open(t, dsn) }
	dbA, dbB = open(), open()
	if err := dbA.Update(func(tx *store.Tx) error {
		id, _, _, err := membership.Init(tx, membership.DevDefaults(), true, time.Now())
		founder = id.FounderNodeID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var err error
	if a, err = New(Config{DB: dbA, Now: time.Now, Node: founder}); err != nil {
		t.Fatal(err)
	}
	if b, err = New(Config{DB: dbB, Now: time.Now, Node: founder}); err != nil {
		t.Fatal(err)
	}
	return a, b, dbA, dbB, founder, dsn
}

// A's own commit (seq s1) whose hook runs after A heard of B's newer record
// (seq s2 > s1) must not put the older record back (review finding).
func TestReplicaRecordOutranksALateLocalHook(t *testing.T) {
	a, b, dbA, _, founder, _ := twoReplicas(t)
	// A commits 0.2.0 (seq s1); its OnCommit hook is late (emulated).
	old := Stored{RunningRelease: "0.2.0", Release: wire.Record{RecordedAt: time.Now().UTC()}}
	var s1 uint64
	if err := dbA.Update(func(tx *store.Tx) error {
		if err := bucketRecords.Put(tx, founder, appendStored(nil, old.RunningRelease, mustFrame(t, old))); err != nil {
			return err
		}
		var err error
		s1, err = bucketRecords.NextSequence(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// B records 0.3.0 (seq s2 > s1); A hears it and reloads.
	if err := b.Record("test", founder, wire.RecordRequest{RunningRelease: "0.3.0"}); err != nil {
		t.Fatal(err)
	}
	running := func() string {
		set, err := a.Describe()
		if err != nil {
			t.Fatal(err)
		}
		return set.Nodes[0].RunningRelease
	}
	for deadline := time.Now().Add(5 * time.Second); running() != "0.3.0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("A never saw B's record")
		}
	}
	late, err := a.cache(founder, old, s1)
	if err != nil {
		t.Fatal(err)
	}
	a.remember(founder, late) // A's late hook
	if got := running(); got != "0.3.0" {
		t.Errorf("A answers runningRelease %s; the store holds 0.3.0 (seq %d < B's)", got, s1)
	}
}
