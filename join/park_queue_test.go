package join

import (
	"stratum/wire"
	"testing"
	"time"
)

// TestParkedPollIgnoresQueueMoves: a parked long-poll, like Wait, is
// answered early only by a state change; a queue move reaches the joiner
// when its hold ends.
func TestParkedPollIgnoresQueueMoves(t *testing.T) {
	e := newEnv(t)
	a, b := e.pending("a"), e.pending("b")
	e.approve(a.JoinID, assignment(1))
	e.approve(b.JoinID, assignment(2))
	c := e.pending("c")
	e.approve(c.JoinID, assignment(3))
	if v := e.view("c", c.JoinID); v.QueuePosition != 2 {
		t.Fatalf("third at %d", v.QueuePosition)
	}
	ready := make(chan struct{})
	close(ready)
	answered := make(chan wire.JoinerView, 1)
	const hold = 1500 * time.Millisecond
	start := time.Now()
	_, end, err := e.svc.Park(keyPin("c"), c.JoinID, wire.StateApproved, hold, ready, func(v wire.JoinerView, _ error) { answered <- v })
	if err != nil || end == nil {
		t.Fatalf("parked %v: %v", end != nil, err)
	}
	e.progress("a", a.JoinID, wire.PhaseDone) // a joins, b takes its turn, c moves up to 1
	select {
	case v := <-answered:
		if el := time.Since(start); el < hold {
			t.Fatalf("a queue move answered the parked poll after %v (hold %v): %+v", el, hold, v)
		}
		if v.State != wire.StateApproved || v.QueuePosition != 1 {
			t.Fatalf("answered %s at %d", v.State, v.QueuePosition)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the parked poll was never answered")
	}
}
