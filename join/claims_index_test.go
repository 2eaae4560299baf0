package join

import (
	"slices"
	"testing"

	"stratum/apierr"
	"stratum/store"
)

// TestClaimsIndexFollowsTheQueue: a queued join's node id and addresses
// are refused to others, a rejection frees them, the join taking its turn
// hands them to its member, and the index rebuilt from scratch (the
// migration) equals the one kept up to date.
func TestClaimsIndexFollowsTheQueue(t *testing.T) {
	e := newEnv(t)
	first := e.pending("a")
	e.approve(first.JoinID, assignment(1)) // takes the turn: delivering
	queued := e.pending("b")
	q := assignment(2)
	q.NodeID = "n-queued01"
	e.approve(queued.JoinID, q) // waits in the queue

	third := e.pending("c")
	clash := assignment(3)
	clash.NodeID = "n-queued01"
	clash.MgmtIP = q.MgmtIP
	_, err := e.svc.Approve(e.admin, third.JoinID, clash)
	ae := wantCode(t, err, apierr.JoinApprovalRefused)
	if got := fieldNamesOf(ae); !slices.Equal(got, []string{"mgmtIp", "nodeId"}) {
		t.Fatalf("fields %v, want mgmtIp and nodeId held by the queued join", got)
	}

	if got, want := e.claimsIndex(), map[string]string{"n/n-queued01": queued.JoinID, "a/" + q.MgmtIP: queued.JoinID, "a/10.9.0.22": queued.JoinID}; !sameMap(got, want) {
		t.Fatalf("index %v, want %v", got, want)
	}
	if _, err := e.svc.Reject(e.admin, queued.JoinID, "wrong rack"); err != nil {
		t.Fatal(err)
	}
	if got := e.claimsIndex(); len(got) != 0 {
		t.Fatalf("a rejected join still claims %v", got)
	}
	e.approve(third.JoinID, clash) // what the rejected join held is free

	// Rebuilding gives the same index as keeping it.
	kept := e.claimsIndex()
	if err := e.db.Update(rebuildClaims); err != nil {
		t.Fatal(err)
	}
	if got := e.claimsIndex(); !sameMap(got, kept) {
		t.Fatalf("rebuilt index %v, kept %v", got, kept)
	}
}

func (e *env) claimsIndex() map[string]string {
	out := map[string]string{}
	_ = e.db.View(func(tx *store.Tx) error {
		return bucketClaims.ForEach(tx, func(k string, v []byte) error { out[k] = string(v); return nil })
	})
	return out
}

func fieldNamesOf(e *apierr.Error) []string {
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
