package joinflow

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
	"stratum/wire"
)

// generation is the cluster's current membership generation.
func generation(t *testing.T, f *stratumtest.Founder) uint64 {
	t.Helper()
	var v wire.MembersView
	f.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &v)
	return v.Generation
}

// apply reports, with m's own leaf, that m applied the current
// generation: what its agent does.
func (m *member) apply(t *testing.T) {
	t.Helper()
	send(t, m.node, "PUT", "https://"+m.f.API+"/v1/cluster/members/"+m.nodeID+"/applied", "", map[string]any{"generation": generation(t, m.f)}).want(t, 200, "")
}

func operatorView(t *testing.T, f *stratumtest.Founder, joinID string) wire.OperatorView {
	t.Helper()
	var v wire.OperatorView
	f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations/"+joinID, nil, 200, &v)
	return v
}

// TestTrust_RemovedMemberGrantsNothing: a member whose machine is gone
// (it never applies another generation) holds the next join in
// installing, named; `stratum members remove` takes it out and the held
// join completes. From then on its transport leaf grants nothing: the
// long-poll it held is answered 404, and every node endpoint refuses it
// (401, as the leaf of a cancelled join: SPEC 10.3), for itself or any
// other node. It has left the release set, and its address is free for a
// new node.
func TestTrust_RemovedMemberGrantsNothing(t *testing.T) {
	f := trustFounder(t, "0.1.0")
	a := joined(t, f, "0.1.0", "192.0.2.11")
	b := joined(t, f, "0.1.0", "192.0.2.12")
	a.apply(t) // b's generation: b is joined
	if v := operatorView(t, f, b.joinID); v.State != wire.StateJoined {
		t.Fatalf("b: %+v", v)
	}
	for _, m := range []*member{a, b} {
		m.record(t, "0.1.0").want(t, 204, "")
	}

	// b dies; c's join waits for it, and says so.
	c, reg := register(t, f, joinToken(t, f, 1), "0.1.0", "192.0.2.13")
	reg.want(t, 201, "")
	c.deliver(t)
	c.progress(t, "installing")
	c.progress(t, "done")
	a.apply(t)
	if v := operatorView(t, f, c.joinID); v.State != wire.StateInstalling || len(v.WaitingFor) != 1 || v.WaitingFor[0].NodeID != b.nodeID {
		t.Fatalf("c is not held by b alone: %+v", v)
	}
	g := generation(t, f)

	// b's long-poll, held on the current generation when it is removed.
	held := make(chan answer, 1)
	go func() {
		held <- send(t, b.node, "GET", fmt.Sprintf("https://%s/v1/cluster/members?wait=30&generation=%d", f.API, g), "", nil)
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case ans := <-held:
		t.Fatalf("b's long-poll answered before the removal: %d %s", ans.status, ans.raw)
	default:
	}

	env := []string{"STRATUM_API=https://" + f.API, "STRATUM_CA_FILE=" + filepath.Join(f.Dir, "ca.pem"), "STRATUM_TOKEN=" + f.Operator(t).Token}
	if r := stratumtest.Run(t, env, "members", "remove", b.nodeID, "--reason", "hardware gone"); r.Code != 0 || !strings.Contains(r.Stdout, "removed "+b.nodeID) {
		t.Fatalf("stratum members remove %s: exit %d\n%s%s", b.nodeID, r.Code, r.Stdout, r.Stderr)
	}
	select {
	case ans := <-held:
		if ans.status != 404 {
			t.Errorf("b's held long-poll after its removal: %d %s, want 404", ans.status, ans.raw)
		}
	case <-time.After(10 * time.Second):
		t.Error("b's held long-poll was not answered when b was removed")
	}
	if v := operatorView(t, f, c.joinID); v.State != wire.StateJoined {
		t.Errorf("the join b held did not complete: %+v", v)
	}
	if got := generation(t, f); got != g+1 {
		t.Errorf("generation %d after the removal, want %d", got, g+1)
	}

	// b's leaf grants nothing, for itself or for anyone else.
	base := "https://" + f.API
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/cluster/members?wait=0"},
		{"PUT", "/v1/cluster/members/" + b.nodeID + "/applied"},
		{"PUT", "/v1/cluster/nodes/" + b.nodeID + "/release"},
		{"PUT", "/v1/cluster/nodes/" + a.nodeID + "/release"},
	} {
		var body any
		switch {
		case strings.HasSuffix(r.path, "/applied"):
			body = map[string]any{"generation": g + 1}
		case strings.HasSuffix(r.path, "/release"):
			body = releaseRecord("0.1.0")
		}
		send(t, b.node, r.method, base+r.path, "", body).want(t, 401, "UNAUTHENTICATED")
	}
	// A's leaf still counts: the refusal is b's, not every node's.
	a.record(t, "0.1.0").want(t, 204, "")

	// b left the release set and the members.
	var set wire.ReleaseSet
	f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &set)
	for _, n := range set.Nodes {
		if n.NodeID == b.nodeID {
			t.Errorf("the removed member is in the release set: %+v", n)
		}
	}
	if len(set.Nodes) != 3 {
		t.Errorf("release set nodes %d, want 3 (founder, a, c)", len(set.Nodes))
	}

	// The audit names the person and the reason.
	var audit struct{ Events []wire.AuditEvent }
	f.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &audit)
	found := false
	for _, e := range audit.Events {
		if e.Kind == "cluster.member.removed" && e.Subject == b.nodeID {
			found = e.Data["reason"] == "hardware gone" && strings.HasPrefix(e.Actor, "admin@")
			if !found {
				raw, _ := json.Marshal(e)
				t.Errorf("audit of the removal: %s", raw)
			}
		}
	}
	if !found {
		t.Error("no cluster.member.removed event for b")
	}

	// b's address is free: a new node gets it.
	d, reg := register(t, f, joinToken(t, f, 1), "0.1.0", "192.0.2.12")
	reg.want(t, 201, "")
	d.deliver(t)
	if d.cert == nil || len(d.cert.IPAddresses) != 1 || d.cert.IPAddresses[0].String() != "192.0.2.12" {
		t.Errorf("the new node's leaf does not carry b's freed address: %+v", d.cert)
	}
}
