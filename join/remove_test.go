package join

import (
	"context"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// joinFully runs key's control-plane join through delivery (with the
// fake OpenBao's node token), installing and done; it answers the join
// id and node id.
func (e *env) joinFully(key string, n int) (string, string) {
	e.t.Helper()
	v := e.pending(key)
	e.approve(v.JoinID, assignment(n))
	e.svc.openBaoWork(context.Background())
	e.progress(key, v.JoinID, wire.PhaseInstalling)
	jv := e.progress(key, v.JoinID, wire.PhaseDone)
	op, err := e.svc.Get(v.JoinID)
	if err != nil || op.Assignment == nil {
		e.t.Fatalf("join %s: %+v %v (joiner view %+v)", key, op, err, jv)
	}
	return v.JoinID, op.Assignment.NodeID
}

// applied has nodeID report the current generation, as its agent would.
func (e *env) applied(nodeID string) {
	e.t.Helper()
	if _, err := e.svc.Applied(nodeID, e.generation()); err != nil {
		e.t.Fatalf("applied %s: %v", nodeID, err)
	}
}

func (e *env) members() []cluster.Member {
	e.t.Helper()
	var out []cluster.Member
	if err := e.db.View(func(tx *store.Tx) error {
		var err error
		out, err = cluster.Members(tx)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestRemoveMember: a member that stopped applying (its hardware gone)
// holds a later join in installing; removing it with a reason deletes
// the member in one transaction (generation bumped and applied by the
// founder, its node token revoked, its addresses and id free again,
// audited with the person and the reason) and the held join completes.
// The founder, a member whose join is still in its turn, an unknown node
// and a missing reason are refused, and a refusal changes nothing.
func TestRemoveMember(t *testing.T) {
	bao := newFakeBao()
	bao.root = false
	e := newEnv(t, func(c *Config) { c.OpenBao = bao })

	_, a := e.joinFully("a", 1)
	bJoin, b := e.joinFully("b", 2)
	e.applied(a) // b's generation: a applies it, b is joined
	if op, _ := e.svc.Get(bJoin); op.State != wire.StateJoined {
		t.Fatalf("b: %+v", op)
	}
	// b dies. c's join waits for it (a applies, b never does).
	cJoin, c := e.joinFully("c", 3)
	e.applied(a)
	op, _ := e.svc.Get(cJoin)
	if op.State != wire.StateInstalling || len(op.WaitingFor) != 1 || op.WaitingFor[0].NodeID != b {
		t.Fatalf("c is not held by b alone: %+v", op)
	}

	refusals := []struct {
		name, node, reason string
		code               apierr.Code
		says               string
	}{
		{"the founder", e.id.FounderNodeID, "gone", apierr.Conflict, "cannot remove itself"},
		{"a member whose join is installing", c, "gone", apierr.Conflict, "stratum joins cancel " + cJoin},
		{"an unknown node", "n-nosuchnd", "gone", apierr.NotFound, "no member n-nosuchnd"},
		{"no reason", b, "", apierr.InvalidInput, "request has problems"},
		{"a blank reason", b, " \t", apierr.InvalidInput, "request has problems"},
		{"a reason too long", b, strings.Repeat("x", maxReasonSize+1), apierr.InvalidInput, "request has problems"},
		{"a reason not UTF-8", b, "\xff", apierr.InvalidInput, "request has problems"},
	}
	g, n, audits := e.generation(), len(e.members()), e.auditCount()
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			_, err := e.svc.RemoveMember(e.admin, r.node, r.reason)
			ae := wantCode(t, err, r.code)
			if !strings.Contains(ae.Message, r.says) {
				t.Errorf("message %q does not say %q", ae.Message, r.says)
			}
			if r.code == apierr.InvalidInput && (len(ae.Fields) != 1 || ae.Fields[0].Field != "reason") {
				t.Errorf("fields %+v, want reason", ae.Fields)
			}
			if e.generation() != g || len(e.members()) != n || e.auditCount() != audits {
				t.Errorf("a refused removal changed the store: generation %d->%d, members %d->%d, audit %d->%d", g, e.generation(), n, len(e.members()), audits, e.auditCount())
			}
		})
	}

	v, err := e.svc.RemoveMember(e.admin, b, "hardware gone")
	if err != nil || v.NodeID != b || v.State != cluster.MemberActive {
		t.Fatalf("remove %s: %+v %v", b, v, err)
	}
	if _, found := e.member(b); found {
		t.Fatal("the removed member is still a member")
	}
	if e.generation() != g+1 {
		t.Errorf("generation %d, want %d", e.generation(), g+1)
	}
	if f, _ := e.member(e.id.FounderNodeID); f.AppliedGeneration != g+1 {
		t.Errorf("the founder applied %d, want %d", f.AppliedGeneration, g+1)
	}
	if op, _ := e.svc.Get(cJoin); op.State != wire.StateJoined {
		t.Errorf("the join b held did not complete: %+v", op)
	}
	if m, _ := e.member(c); m.State != cluster.MemberActive {
		t.Errorf("c is %s, want active", m.State)
	}
	evs, err := e.db.AuditEvents(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var removed *wire.AuditEvent
	for i := range evs {
		if evs[i].Kind == "cluster.member.removed" && evs[i].Subject == b {
			removed = &evs[i]
		}
	}
	if removed == nil || removed.Actor != e.admin.Subject || removed.Data["reason"] != "hardware gone" || removed.Data["joinId"] != bJoin {
		t.Fatalf("audit of the removal: %+v", removed)
	}

	// Its OpenBao node token is revoked by accessor, as a cancelled join's.
	e.svc.openBaoWork(context.Background())
	if _, live := bao.live["acc-"+b]; live || !contains(bao.revoked, "acc-"+b) {
		t.Errorf("the removed member's token: live=%v revoked=%v", live, bao.revoked)
	}

	// Removed twice: it is no member.
	_, err = e.svc.RemoveMember(e.admin, b, "again")
	wantCode(t, err, apierr.NotFound)

	// Its node id and addresses are free: a new node may take them.
	d := e.pending("d")
	as := assignment(2)
	as.NodeID = b
	if v := e.approve(d.JoinID, as); v.Assignment == nil || v.Assignment.NodeID != b {
		t.Fatalf("approving d with the removed member's id and addresses: %+v", v)
	}
}
