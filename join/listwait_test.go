package join

import (
	"context"
	"stratum/wire"
	"testing"
	"time"
)

// The operator's list long-poll answers at once for a stale index, holds
// for a current one, and a new registration wakes it within milliseconds.
func TestWaitListWakesOnNewRegistration(t *testing.T) {
	e := newEnv(t)
	e.pending("a")
	list, idx, err := e.svc.WaitList(context.Background(), "", "", time.Minute)
	if err != nil || len(list) != 1 || idx == "" {
		t.Fatalf("first answer: %d registrations, index %q, %v", len(list), idx, err)
	}
	for _, stale := range []string{"0000000000000000", "not-an-index"} {
		start := time.Now()
		if _, got, err := e.svc.WaitList(context.Background(), "", stale, time.Minute); err != nil || got != idx || time.Since(start) > time.Second {
			t.Errorf("stale index %q: index %q %v after %v", stale, got, err, time.Since(start))
		}
	}
	start := time.Now()
	if _, got, err := e.svc.WaitList(context.Background(), "", idx, 100*time.Millisecond); err != nil || got != idx || time.Since(start) < 100*time.Millisecond {
		t.Errorf("current index: answered %q %v after %v, want a 100ms hold", got, err, time.Since(start))
	}

	type answer struct {
		list  []wire.OperatorView
		index string
		at    time.Time
	}
	done := make(chan answer, 1)
	go func() {
		l, i, _ := e.svc.WaitList(context.Background(), "", idx, time.Minute)
		done <- answer{l, i, time.Now()}
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter subscribe
	registered := time.Now()
	e.pending("b")
	select {
	case a := <-done:
		if len(a.list) != 2 || a.index == idx {
			t.Errorf("woken with %d registrations, index %q (was %q)", len(a.list), a.index, idx)
		}
		if d := a.at.Sub(registered); d > 500*time.Millisecond {
			t.Errorf("woken %v after the registration", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a new registration did not wake the list waiter")
	}
	if n := e.svc.Hub().watched(); n != 0 {
		t.Errorf("%d topics left behind", n)
	}
}

// A filtered waiter answers when its filtered list changes: an approval
// takes a registration out of the pending list.
func TestWaitListFilteredByState(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	_, idx, err := e.svc.WaitList(context.Background(), wire.StatePending, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []wire.OperatorView, 1)
	go func() {
		l, _, _ := e.svc.WaitList(context.Background(), wire.StatePending, idx, time.Minute)
		done <- l
	}()
	time.Sleep(50 * time.Millisecond)
	e.approve(v.JoinID, assignment(2))
	select {
	case l := <-done:
		if len(l) != 0 {
			t.Errorf("pending list after the approval has %d registrations", len(l))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the approval did not wake the filtered waiter")
	}
	if _, _, err := e.svc.WaitList(context.Background(), "bogus", "", 0); err == nil {
		t.Error("an unknown state filter was accepted")
	}
}
