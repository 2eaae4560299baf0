package join

import (
	"context"
	"strings"
	"sync"
	"testing"

	"stratum/apierr"
	"stratum/openbao"
	"stratum/wire"
)

// fakeBao is the founder's OpenBao in memory: a founder token that is a
// root token until converged, node tokens by accessor, an outage switch.
type fakeBao struct {
	mu      sync.Mutex
	root    bool
	down    bool
	n       int
	live    map[string]string // accessor -> node id
	revoked []string
	minted  []string
	lookups int
}

func newFakeBao() *fakeBao { return &fakeBao{root: true, live: map[string]string{}} }

func (f *fakeBao) FounderToken(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	if f.down {
		return "", apierr.New(apierr.Unavailable, "OpenBao lookup-self failed, the delivery waits: connection refused")
	}
	if err := openbao.CheckFounderToken(openbao.TokenInfo{Policies: map[bool][]string{true: {"root"}, false: {"stratum-cp"}}[f.root]}); err != nil {
		return "", err
	}
	return "founder-cp-token", nil
}

func (f *fakeBao) MintNodeToken(_ context.Context, founder, nodeID string) (openbao.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	acc := "acc-" + nodeID
	f.live[acc] = nodeID
	f.minted = append(f.minted, nodeID)
	return openbao.Token{Token: "node-token-" + nodeID, Accessor: acc}, nil
}

func (f *fakeBao) Revoke(_ context.Context, accessor string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return apierr.New(apierr.Unavailable, "down")
	}
	delete(f.live, accessor)
	f.revoked = append(f.revoked, accessor)
	return nil
}

func (f *fakeBao) set(fn func(*fakeBao)) { f.mu.Lock(); fn(f); f.mu.Unlock() }

// TestOpenBaoDeliveryFlow: with an OpenBao, a control-plane join waits
// approved while the founder's token is a root token (its views say
// OPENBAO_ROOT_TOKEN) or OpenBao is down, is delivered with a minted node
// token once the token is scoped, keeps only the accessor on the member,
// and a cancelled join's token is revoked (after an outage, once it ends).
// A worker behind no control-plane join is delivered at once, without
// OpenBao tokens.
func TestOpenBaoDeliveryFlow(t *testing.T) {
	bao := newFakeBao()
	e := newEnv(t, func(c *Config) { c.OpenBao = bao })
	ctx := context.Background()

	v := e.pending("cp1")
	e.approve(v.JoinID, assignment(1))
	if again := e.svc.openBaoWork(ctx); !again {
		t.Fatal("a join held by the root-token rule is not retried")
	}
	jv := e.view("cp1", v.JoinID)
	if jv.State != wire.StateApproved || !strings.HasPrefix(jv.Reason, "OPENBAO_ROOT_TOKEN: ") || jv.Delivery != nil {
		t.Fatalf("joiner view under a root token: %+v", jv)
	}
	if op, _ := e.svc.Get(v.JoinID); !strings.HasPrefix(op.Reason, "OPENBAO_ROOT_TOKEN: ") {
		t.Fatalf("operator view under a root token: %+v", op)
	}
	bao.set(func(f *fakeBao) { f.root, f.down = false, true })
	e.svc.openBaoWork(ctx)
	if jv := e.view("cp1", v.JoinID); jv.State != wire.StateApproved || !strings.HasPrefix(jv.Reason, "UNAVAILABLE: ") {
		t.Fatalf("joiner view with OpenBao down: %+v", jv)
	}
	if len(bao.minted) != 0 {
		t.Fatal("a node token was minted while the delivery could not happen")
	}
	bao.set(func(f *fakeBao) { f.down = false })
	if again := e.svc.openBaoWork(ctx); again {
		t.Fatal("nothing left to do, yet a retry is asked")
	}
	jv = e.view("cp1", v.JoinID)
	if jv.State != wire.StateDelivering || jv.Reason != "" || jv.Delivery == nil {
		t.Fatalf("after the converge: %+v", jv)
	}
	nodeID := jv.Delivery.Bundle.Nodes[len(jv.Delivery.Bundle.Nodes)-1].NodeID
	if b := jv.Delivery.Bundle; b.OpenBaoToken != "founder-cp-token" || b.OpenBaoNodeToken != "node-token-"+nodeID {
		t.Fatalf("bundle tokens %q %q", b.OpenBaoToken, b.OpenBaoNodeToken)
	}
	if m, _ := e.member(nodeID); m.OpenBaoAccessor != "acc-"+nodeID {
		t.Fatalf("member accessor %q", m.OpenBaoAccessor)
	}

	// Cancelled while OpenBao is down: revoked once it is back.
	bao.set(func(f *fakeBao) { f.down = true })
	if _, err := e.svc.Cancel(e.admin, v.JoinID, "wrong rack"); err != nil {
		t.Fatal(err)
	}
	if again := e.svc.openBaoWork(ctx); !again {
		t.Fatal("a revocation that failed is not retried")
	}
	bao.set(func(f *fakeBao) { f.down = false })
	e.svc.openBaoWork(ctx)
	if _, live := bao.live["acc-"+nodeID]; live || len(bao.revoked) != 1 {
		t.Fatalf("the cancelled join's token: live=%v revoked=%v", live, bao.revoked)
	}

	// A worker needs nothing from OpenBao: delivered at approval.
	w, _, err := e.register("w1", e.token("worker", 1), clusterRelease, false)
	if err != nil {
		t.Fatal(err)
	}
	e.approve(w.JoinID, assignment(2))
	if wv := e.view("w1", w.JoinID); wv.State != wire.StateDelivering || wv.Delivery.Bundle.OpenBaoToken != "" || wv.Delivery.Bundle.OpenBaoNodeToken != "" {
		t.Fatalf("worker: %+v", wv)
	}
	if len(bao.minted) != 1 {
		t.Fatalf("tokens minted for %v", bao.minted)
	}
}
