package join

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

type fixedBoot map[string]cluster.Boot

func (b fixedBoot) Boot(id string) (cluster.Boot, bool) { v, ok := b[id]; return v, ok }

// TestWaitMembers: a node's membership long-poll answers at once on
// another generation, holds on its own, and is woken by an admission.
// Only members may ask.
func TestWaitMembers(t *testing.T) {
	e := newEnv(t)
	g := e.generation()
	start := time.Now()
	v, err := e.svc.WaitMembers(context.Background(), "n-founder1", g-1, time.Minute)
	if err != nil || v.Generation != g || time.Since(start) > time.Second {
		t.Fatalf("another generation: %+v %v after %v", v, err, time.Since(start))
	}
	_, err = e.svc.WaitMembers(context.Background(), "n-nosuchnd", g, time.Second)
	wantCode(t, err, apierr.NotFound)

	start = time.Now()
	if v, err := e.svc.WaitMembers(context.Background(), "n-founder1", g, 150*time.Millisecond); err != nil || v.Generation != g || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("the hold: %+v %v after %v", v, err, time.Since(start))
	}

	woke := make(chan wire.MembersView, 1)
	go func() {
		v, _ := e.svc.WaitMembers(context.Background(), "n-founder1", g, time.Minute)
		woke <- nodeList(t, v)
	}()
	waitFor(t, func() bool { return e.svc.Hub().Waiters() == 1 })
	a := e.pending("a")
	// Not a generation change: the waiter keeps waiting.
	select {
	case v := <-woke:
		t.Fatalf("a registration answered the membership long-poll: %+v", v)
	case <-time.After(100 * time.Millisecond):
	}
	e.approve(a.JoinID, assignment(1))
	select {
	case v := <-woke:
		if v.Generation != g+1 || len(v.Members) != 2 || v.Members[1].State != cluster.MemberJoining {
			t.Fatalf("woken with %+v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an admission did not wake the membership long-poll")
	}
}

// TestBootHealthInViews: the prober's boot health reaches both members
// lists and the bundle's nodes[]; a member not probed has none.
func TestBootHealthInViews(t *testing.T) {
	boot := fixedBoot{"n-founder1": {State: cluster.BootReady, Phase: "serving", PhaseMs: 5, LastBootMs: 1200}}
	e := newEnv(t, func(c *Config) { c.Boot = boot })
	a := e.pending("a")
	op := e.approve(a.JoinID, assignment(1))
	node := op.Assignment.NodeID
	boot[node] = cluster.Boot{State: cluster.BootStarting, Phase: "record", PhaseMs: 40}
	v, err := e.svc.Members()
	if err != nil || v.Members[0].BootState != "ready" || v.Members[0].LastBootMs != 1200 || v.Members[1].BootState != "starting" || v.Members[1].BootPhase != "record" {
		t.Fatalf("members: %+v %v", v.Members, err)
	}
	view := e.view("a", a.JoinID)
	nodes := view.Delivery.Bundle.Nodes
	if len(nodes) != 2 || nodes[0].BootState != "ready" || nodes[0].BootPhaseMs != 5 || nodes[1].BootState != "starting" {
		t.Fatalf("bundle nodes: %+v", nodes)
	}
	delete(boot, node)
	if v, _ := e.svc.WaitMembers(context.Background(), node, 0, 0); nodeList(t, v).Members[1].BootState != "" {
		t.Fatalf("an unprobed member carries boot fields: %s", v.Body)
	}
}

// nodeList decodes the list a node is answered with.
func nodeList(t *testing.T, v NodeMembers) wire.MembersView {
	t.Helper()
	var out wire.MembersView
	if err := json.Unmarshal(v.Body, &out); err != nil || out.Generation != v.Generation {
		t.Errorf("the node's list %q: %v", v.Body, err)
	}
	return out
}

// TestNodeMembersBuiltOncePerGeneration: every node is answered with the
// same bytes within a generation, the list the admin endpoint lists; a
// change that keeps the generation (a member's report) reaches it within
// its max age, a new generation at once, and a record forged behind the
// founder's back grants nothing.
func TestNodeMembersBuiltOncePerGeneration(t *testing.T) {
	bao := newFakeBao()
	bao.root = false
	e := newEnv(t, func(c *Config) { c.OpenBao = bao })
	_, a := e.joinFully("a", 1)
	_, b := e.joinFully("b", 2) // a has not applied b's generation
	ask := func(node string) NodeMembers {
		t.Helper()
		v, err := e.svc.WaitMembers(context.Background(), node, 0, 0)
		if err != nil {
			t.Fatalf("%s asks: %v", node, err)
		}
		return v
	}
	const maxAge = 100 * time.Millisecond
	e.svc.nodeList.maxAge = maxAge
	first, second := ask(a), ask(b)
	if &first.Body[0] != &second.Body[0] {
		t.Fatal("two nodes' lists were built twice within a generation")
	}
	admin, err := e.svc.Members()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := encodeAnswer(admin); string(first.Body) != string(want) {
		t.Fatalf("a node's list %s\nis not the admin list %s", first.Body, want)
	}
	if got := nodeList(t, first); got.Members[1].NodeID != a || got.Members[1].AppliedGeneration == e.generation() {
		t.Fatalf("a applied before it reported: %+v", got.Members[1])
	}

	e.applied(a) // b is joined: same generation, a applied it, b active
	if held := ask(b); string(held.Body) != string(first.Body) {
		t.Fatalf("within its max age the list changed: %s", held.Body)
	}
	time.Sleep(maxAge)
	after := ask(b)
	if got := nodeList(t, after); after.Generation != first.Generation || got.Members[1].AppliedGeneration != e.generation() ||
		got.Members[2].State != cluster.MemberActive {
		t.Fatalf("after a's report and the max age the list is %s", after.Body)
	}

	// A new generation is answered at once.
	_, c := e.joinFully("c", 3)
	if got := nodeList(t, ask(b)); got.Generation != e.generation() || len(got.Members) != 4 || got.Members[3].NodeID != c {
		t.Fatalf("after c's admission the list is %+v", got)
	}

	// a's record rewritten without the data key: a is answered as an
	// unknown node at once and left out of the list within its max age.
	if err := e.db.Update(func(tx *store.Tx) error {
		return store.Named("members").Put(tx, a, []byte(`{"nodeId":"`+a+`","role":"control-plane","state":"active","order":2,"labels":{"forged":"yes"}}`))
	}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.WaitMembers(context.Background(), a, 0, 0)
	wantCode(t, err, apierr.NotFound)
	time.Sleep(maxAge)
	forged := nodeList(t, ask(b))
	if len(forged.Members) != 3 || forged.Members[1].NodeID != b {
		t.Fatalf("the list with a forged record: %+v", forged.Members)
	}
}
