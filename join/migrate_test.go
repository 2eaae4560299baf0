package join

import (
	"testing"

	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// TestTrustMigration (migration 6, both steps cluster's): a store as an earlier build left it (members without
// a leaf serial or installed mark, no admission release) gets each
// member's audited serial, the installed mark where the join is
// installing, and the configured release as its admission release.
func TestTrustMigration(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	op := e.approve(v.JoinID, assignment(1))
	e.progress("a", v.JoinID, wire.PhaseInstalling)
	node := op.Assignment.NodeID
	want, _ := e.member(node)
	if want.LeafSerial == "" || !want.Installed {
		t.Fatalf("a delivered, installing member: %+v", want)
	}
	legacy := cluster.Member{MemberView: wire.MemberView{NodeID: "n-legacy01", State: cluster.MemberActive}, JoinID: "j-noaudit"}
	err := e.db.Update(func(tx *store.Tx) error {
		m := want
		m.LeafSerial, m.Installed = "", false
		if err := cluster.PutMember(tx, m); err != nil {
			return err
		}
		if err := cluster.PutMember(tx, legacy); err != nil {
			return err
		}
		return store.Named("cluster").Delete(tx, "admission-release")
	})
	if err != nil {
		t.Fatal(err)
	}
	before := e.auditCount()
	if err := e.db.Update(func(tx *store.Tx) error { return store.ApplyMigration(tx, 6) }); err != nil {
		t.Fatal(err)
	}
	got, _ := e.member(node)
	if got.LeafSerial != want.LeafSerial || !got.Installed {
		t.Fatalf("migrated member %+v, want serial %s and installed", got, want.LeafSerial)
	}
	if l, _ := e.member(legacy.NodeID); l.LeafSerial != "" || l.Installed {
		t.Fatalf("a member without an audited delivery: %+v", l)
	}
	var rel string
	_ = e.db.View(func(tx *store.Tx) (err error) { rel, err = cluster.AdmissionRelease(tx); return err })
	if rel != clusterRelease || e.auditCount() != before+1 {
		t.Fatalf("admission %s, audit events %d -> %d", rel, before, e.auditCount())
	}
	// Applying it again changes nothing.
	if err := e.db.Update(func(tx *store.Tx) error { return store.ApplyMigration(tx, 6) }); err != nil || e.auditCount() != before+1 {
		t.Fatalf("second run: %v, %d events", err, e.auditCount())
	}
}
