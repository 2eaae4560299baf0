package join

import (
	"context"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/wire"
)

func TestQueue(t *testing.T) {
	e := newEnv(t)
	a, b, c := e.pending("a"), e.pending("b"), e.pending("c")
	first := e.approve(a.JoinID, assignment(1))
	e.approve(b.JoinID, assignment(2))
	e.approve(c.JoinID, assignment(3))
	if first.State != wire.StateDelivering {
		t.Fatalf("first: %s", first.State)
	}
	if v := e.view("b", b.JoinID); v.State != wire.StateApproved || v.QueuePosition != 1 || v.Delivery != nil {
		t.Fatalf("second: %s at %d", v.State, v.QueuePosition)
	}
	if v := e.view("c", c.JoinID); v.QueuePosition != 2 {
		t.Fatalf("third at %d", v.QueuePosition)
	}
	if list, _ := e.svc.List(wire.StateApproved); len(list) != 2 || list[0].QueuePosition != 1 || list[1].QueuePosition != 2 {
		t.Fatalf("approved list %+v", list)
	}

	// The third's waiter is not woken when it moves up (only a state
	// change answers early); its hold ends with the new position.
	const hold = 1500 * time.Millisecond
	moved := make(chan wire.JoinerView, 1)
	waitStart := time.Now()
	go func() {
		v, _ := e.svc.Wait(context.Background(), keyPin("c"), c.JoinID, wire.StateApproved, hold)
		moved <- v
	}()
	waitFor(t, func() bool { return e.svc.Hub().Waiters() == 1 })

	e.progress("a", a.JoinID, wire.PhaseInstalling)
	if v := e.view("b", b.JoinID); v.State != wire.StateApproved || v.QueuePosition != 1 {
		t.Fatalf("second while the first installs: %s at %d", v.State, v.QueuePosition)
	}
	if v := e.progress("a", a.JoinID, wire.PhaseDone); v.State != wire.StateJoined {
		t.Fatalf("first: %s", v.State)
	}
	second := e.view("b", b.JoinID)
	if second.State != wire.StateDelivering || second.QueuePosition != 0 || second.Delivery == nil {
		t.Fatalf("second after the first joined: %s", second.State)
	}
	select {
	case v := <-moved:
		if v.State != wire.StateApproved || v.QueuePosition != 1 {
			t.Errorf("third answered %s at %d", v.State, v.QueuePosition)
		}
		if el := time.Since(waitStart); el < hold {
			t.Errorf("a queue move answered the third's long-poll after %v, before its hold of %v ended", el, hold)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the third's waiter was never answered")
	}
	// The first joiner is a member now: the second is joined only once
	// it too reports the second's generation applied.
	g := second.Delivery.Bundle.Generation
	if len(second.Delivery.Bundle.Nodes) != 3 {
		t.Errorf("second's bundle nodes %+v", second.Delivery.Bundle.Nodes)
	}
	v := e.progress("b", b.JoinID, wire.PhaseDone)
	if v.State != wire.StateInstalling {
		t.Fatalf("second done before every member applied: %s", v.State)
	}
	// The stall names the member that holds it, to the joiner and to the
	// operator (SPEC 17).
	firstID := first.Assignment.NodeID
	if v.Generation != g || len(v.WaitingFor) != 1 || v.WaitingFor[0].NodeID != firstID || v.WaitingFor[0].AppliedGeneration >= g {
		t.Errorf("the joiner's view waits for %+v at generation %d, want only %s below %d", v.WaitingFor, v.Generation, firstID, g)
	}
	if ov, err := e.svc.Get(b.JoinID); err != nil || len(ov.WaitingFor) != 1 || ov.WaitingFor[0].NodeID != firstID {
		t.Errorf("the operator's view waits for %+v (%v), want %s", ov.WaitingFor, err, firstID)
	}
	if list, err := e.svc.List(wire.StateInstalling); err != nil || len(list) != 1 || len(list[0].WaitingFor) != 1 || list[0].WaitingFor[0].NodeID != firstID {
		t.Errorf("the operator's list of installing joins: %+v (%v)", list, err)
	}
	_, err := e.svc.Applied(first.Assignment.NodeID, g+1)
	wantCode(t, err, apierr.InvalidInput)
	_, err = e.svc.Applied("n-nosuchnd", g)
	wantCode(t, err, apierr.NotFound)
	m, err := e.svc.Applied(first.Assignment.NodeID, g)
	if err != nil || m.AppliedGeneration != g {
		t.Fatalf("applied: %+v %v", m, err)
	}
	if v := e.view("b", b.JoinID); v.State != wire.StateJoined || v.WaitingFor != nil {
		t.Fatalf("second after every member applied: %s, waiting for %+v", v.State, v.WaitingFor)
	}
	// The same report again (a retry whose answer was lost) answers the
	// member, from a read, and records no event.
	before := len(e.auditKinds())
	again, err := e.svc.Applied(first.Assignment.NodeID, g)
	if err != nil || again.AppliedGeneration != g || again.NodeID != firstID {
		t.Fatalf("the same report again: %+v %v", again, err)
	}
	if after := len(e.auditKinds()); after != before {
		t.Errorf("the same report again added %d audit events", after-before)
	}
	if v := e.view("c", c.JoinID); v.State != wire.StateDelivering {
		t.Fatalf("third: %s", v.State)
	}
	e.auditCount()
}

func TestDeliveryTimeout(t *testing.T) {
	e := newEnv(t)
	a, b := e.pending("a"), e.pending("b")
	first := e.approve(a.JoinID, assignment(1))
	e.approve(b.JoinID, assignment(2))
	g := e.generation()

	e.clock.Add(DefaultDeliveryTimeout - time.Second)
	if n, err := e.svc.ExpireDeliveries(); err != nil || n != 0 {
		t.Fatalf("expired early: %d %v", n, err)
	}
	e.progress("a", a.JoinID, wire.PhaseInstalling)
	e.clock.Add(time.Second)
	if n, err := e.svc.ExpireDeliveries(); err != nil || n != 1 {
		t.Fatalf("expire: %d %v", n, err)
	}
	v := e.view("a", a.JoinID)
	if v.State != wire.StateFailed || !strings.Contains(v.Reason, "delivery timeout") || v.Delivery != nil {
		t.Fatalf("timed out join: %s %q", v.State, v.Reason)
	}
	if _, found := e.member(first.Assignment.NodeID); found {
		t.Error("the timed-out member is still a member")
	}
	// Removal bumped the generation; the next admission bumped it again.
	if got := e.generation(); got != g+2 {
		t.Errorf("generation %d, want %d", got, g+2)
	}
	if v := e.view("b", b.JoinID); v.State != wire.StateDelivering || v.Delivery.Bundle.Generation != g+2 || len(v.Delivery.Bundle.Nodes) != 2 {
		t.Fatalf("queue did not move: %s", v.State)
	}
	// A late report from the failed joiner is refused, its failure answered.
	_, err := e.svc.Progress(keyPin("a"), a.JoinID, wire.ProgressRequest{Phase: wire.PhaseInstalling})
	wantCode(t, err, apierr.Conflict)
	if v := e.progress("a", a.JoinID, wire.PhaseFailed); v.State != wire.StateFailed {
		t.Errorf("repeated failure: %s", v.State)
	}
}

// Step answers the one deadline there is (none for an empty queue), the
// turn's change wakes it, and the step at the deadline fails the join:
// the founder's scheduler needs no polling.
func TestStepAnswersTheDeadline(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Now = time.Now; c.DeliveryTimeout = 150 * time.Millisecond })
	ctx := context.Background()
	if d := e.svc.Step(ctx); d >= 0 {
		t.Fatalf("an empty queue is due again in %v, want only when woken", d)
	}
	v := e.pending("a")
	e.approve(v.JoinID, assignment(1))
	select {
	case <-e.svc.Wake():
	case <-time.After(5 * time.Second):
		t.Fatal("the join that got its turn did not wake the loop")
	}
	d := e.svc.Step(ctx)
	if d <= 0 || d > 150*time.Millisecond {
		t.Fatalf("due again in %v, want the delivery deadline (at most 150ms)", d)
	}
	if got := e.view("a", v.JoinID); got.State != wire.StateDelivering {
		t.Fatalf("before the deadline: %s", got.State)
	}
	time.Sleep(d)
	e.svc.Step(ctx)
	if got := e.view("a", v.JoinID); got.State != wire.StateFailed {
		t.Fatalf("after the deadline: %s, want failed", got.State)
	}
}

func TestCancelAndReject(t *testing.T) {
	e := newEnv(t)
	a, b, c := e.pending("a"), e.pending("b"), e.pending("c")
	first := e.approve(a.JoinID, assignment(1))
	e.approve(b.JoinID, assignment(2))
	g := e.generation()

	_, err := e.svc.Cancel(e.admin, b.JoinID, "")
	wantCode(t, err, apierr.Conflict)
	_, err = e.svc.Reject(e.admin, a.JoinID, "wrong rack")
	wantCode(t, err, apierr.Conflict)
	_, err = e.svc.Cancel(e.admin, "j-nosuchjn", "")
	wantCode(t, err, apierr.NotFound)

	got, err := e.svc.Cancel(e.admin, a.JoinID, "wrong cable")
	if err != nil || got.State != wire.StateFailed || got.Reason != "wrong cable" {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	if _, found := e.member(first.Assignment.NodeID); found {
		t.Error("the cancelled member is still a member")
	}
	if e.generation() != g+2 {
		t.Errorf("generation %d, want %d (removal, then the next admission)", e.generation(), g+2)
	}
	if v := e.view("b", b.JoinID); v.State != wire.StateDelivering {
		t.Fatalf("next: %s", v.State)
	}
	// Rejecting needs a reason (SPEC 17); a refused one changes nothing.
	e.approve(c.JoinID, assignment(3))
	for _, none := range []string{"", "  \n"} {
		_, err = e.svc.Reject(e.admin, c.JoinID, none)
		if ae := wantCode(t, err, apierr.InvalidInput); len(ae.Fields) != 1 || ae.Fields[0].Field != "reason" {
			t.Errorf("reject with reason %q: %+v", none, ae)
		}
	}
	if v := e.view("c", c.JoinID); v.State != wire.StateApproved {
		t.Fatalf("a refused rejection moved the join to %s", v.State)
	}
	// Rejecting from the queue or before approval ends it with the reason.
	got, err = e.svc.Reject(e.admin, c.JoinID, "wrong rack")
	if err != nil || got.State != wire.StateRejected || got.QueuePosition != 0 || got.Reason != "wrong rack" {
		t.Fatalf("reject approved: %+v %v", got, err)
	}
	if v := e.view("c", c.JoinID); v.State != wire.StateRejected || v.Reason == "" {
		t.Errorf("joiner sees %s %q", v.State, v.Reason)
	}
	_, err = e.svc.Reject(e.admin, c.JoinID, "again")
	wantCode(t, err, apierr.Conflict)
	_, err = e.svc.Reject(e.admin, c.JoinID, strings.Repeat("x", 2000))
	wantCode(t, err, apierr.InvalidInput)
	members, _ := e.svc.Members()
	for _, m := range members.Members {
		if m.State != cluster.MemberActive && m.State != cluster.MemberJoining {
			t.Errorf("member %s in %s", m.NodeID, m.State)
		}
	}
	e.auditCount()
}

func TestProgressRules(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	_, err := e.svc.Progress(keyPin("a"), v.JoinID, wire.ProgressRequest{Phase: wire.PhaseInstalling})
	wantCode(t, err, apierr.Conflict)
	_, err = e.svc.Progress(keyPin("a"), v.JoinID, wire.ProgressRequest{Phase: "finished"})
	wantCode(t, err, apierr.InvalidInput)
	if _, err := DecodeProgress([]byte(`{"phase":"done","msg":"x"}`)); apierr.CodeOf(err) != apierr.InvalidInput {
		t.Errorf("unknown field accepted: %v", err)
	}
	e.approve(v.JoinID, assignment(1))
	got, err := e.svc.Progress(keyPin("a"), v.JoinID, wire.ProgressRequest{Phase: wire.PhaseFailed, Message: "disk full"})
	if err != nil || got.State != wire.StateFailed || got.Reason != "disk full" {
		t.Fatalf("failed: %+v %v", got, err)
	}
}
