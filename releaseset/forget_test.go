package releaseset_test

import (
	"testing"
	"time"

	membership "stratum/cluster"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

// TestForgetRemovedMember: a member removed with Forget in the same
// transaction leaves the set (its nodes, its running release) at once,
// and a node admitted later under the same id starts with no record: the
// stored record and the cached one are both gone.
func TestForgetRemovedMember(t *testing.T) {
	db, _ := storetest.Temp(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	founder := initCluster(t, db, now)
	const gone = "n-gone0001"
	admitInstalled(t, db, gone, now)
	s := newSet(t, db, now, founder)
	for i, n := range []string{founder, gone} {
		if err := s.Record("test", n, wire.RecordRequest{RunningRelease: []string{"0.3.0", "0.2.0"}[i], Release: releasesettest.Record(i, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	set, err := s.Describe()
	if err != nil || set.RunningRelease != "0.2.0" || nodeIn(set, gone) == nil || !nodeIn(set, gone).Recorded {
		t.Fatalf("before the removal: running %q, %s %+v, %v", set.RunningRelease, gone, nodeIn(set, gone), err)
	}

	removeForgetting(t, db, gone)
	set, err = s.Describe()
	if err != nil || set.RunningRelease != "0.3.0" || len(set.Nodes) != 1 || nodeIn(set, gone) != nil {
		t.Fatalf("after the removal: running %q, nodes %+v, %v", set.RunningRelease, set.Nodes, err)
	}

	admitInstalled(t, db, gone, now)
	set, err = s.Describe()
	if n := nodeIn(set, gone); err != nil || n == nil || n.Recorded || n.Release != nil {
		t.Fatalf("a node admitted again under %s inherits the removed one's record: %+v %v", gone, n, err)
	}
	// Forgetting a node that never recorded is no error and no change.
	if err := db.Update(func(tx *store.Tx) error { return releaseset.Forget(tx, "n-never001") }); err != nil {
		t.Fatal(err)
	}
}

// initCluster initializes a dev cluster in db and answers its founder.
func initCluster(t *testing.T, db *store.DB, now time.Time) string {
	t.Helper()
	var founder string
	if err := db.Update(func(tx *store.Tx) error {
		id, _, _, err := membership.Init(tx, membership.DevDefaults(), true, now)
		founder = id.FounderNodeID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return founder
}

// newSet is db's release set as founder answers it, at now.
func newSet(t *testing.T, db *store.DB, now time.Time, founder string) *releaseset.Service {
	t.Helper()
	s, err := releaseset.New(releaseset.Config{DB: db, Now: func() time.Time { return now }, Node: founder, ControlPlane: wire.ControlPlane{Version: "v1", Commit: "c1"}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// admitInstalled admits node as a joined worker would be: its records count.
func admitInstalled(t *testing.T, db *store.DB, node string, now time.Time) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error {
		_, err := membership.Admit(tx, membership.Member{MemberView: wire.MemberView{NodeID: node, Role: "worker"}, JoinID: "j-" + node[2:], Installed: true}, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// removeForgetting removes node as the join domain does: the member and
// its record in one transaction.
func removeForgetting(t *testing.T, db *store.DB, node string) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error {
		if err := membership.Remove(tx, node); err != nil {
			return err
		}
		return releaseset.Forget(tx, node)
	}); err != nil {
		t.Fatal(err)
	}
}

func nodeIn(set wire.ReleaseSet, id string) *wire.SetNode {
	for i := range set.Nodes {
		if set.Nodes[i].NodeID == id {
			return &set.Nodes[i]
		}
	}
	return nil
}
