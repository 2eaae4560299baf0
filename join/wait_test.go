package join

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/wire"
)

func TestWaitAnswersAtOnce(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	for _, last := range []string{"", wire.StateApproved} {
		start := time.Now()
		got, err := e.svc.Wait(context.Background(), keyPin("a"), v.JoinID, last, 60*time.Second)
		if err != nil || got.State != wire.StatePending || time.Since(start) > time.Second {
			t.Errorf("lastState %q: %s %v after %v", last, got.State, err, time.Since(start))
		}
	}
	_, err := e.svc.Wait(context.Background(), keyPin("b"), v.JoinID, wire.StatePending, time.Second)
	wantCode(t, err, apierr.NotFound)
	if n := e.svc.Hub().watched(); n != 0 {
		t.Errorf("%d topics left behind", n)
	}
}

func TestWaitHoldsThenAnswers(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	start := time.Now()
	got, err := e.svc.Wait(context.Background(), keyPin("a"), v.JoinID, wire.StatePending, 100*time.Millisecond)
	el := time.Since(start)
	if err != nil || got.State != wire.StatePending {
		t.Fatalf("%s %v", got.State, err)
	}
	if el < 100*time.Millisecond || el > time.Second {
		t.Errorf("held %v, want 100-105ms", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if got, err := e.svc.Wait(ctx, keyPin("a"), v.JoinID, wire.StatePending, 60*time.Second); err != nil || got.State != wire.StatePending || time.Since(start) > time.Second {
		t.Errorf("ctx end: %s %v after %v", got.State, err, time.Since(start))
	}
}

// 1,000 waiters on one registration are released by one state change,
// and leave no goroutine or subscription behind.
func TestThousandWaiters(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	baseline := runtime.NumGoroutine()
	const n = 1000
	var wg sync.WaitGroup
	states := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := e.svc.Wait(context.Background(), keyPin("a"), v.JoinID, wire.StatePending, 60*time.Second)
			if err != nil {
				t.Error(err)
			}
			states <- got.State
		}()
	}
	waitFor(t, func() bool { return e.svc.Hub().Waiters() == n })
	start := time.Now()
	if _, err := e.svc.Reject(e.admin, v.JoinID, "test"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("releasing %d waiters took %v", n, el)
	} else {
		t.Logf("%d waiters released in %v", n, el)
	}
	close(states)
	for s := range states {
		if s != wire.StateRejected {
			t.Fatalf("a waiter answered %s", s)
		}
	}
	if w := e.svc.Hub().watched(); w != 0 {
		t.Errorf("%d topics left behind", w)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= baseline })
}

func TestHubCloseReleasesWaiters(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := e.svc.Wait(context.Background(), keyPin("a"), v.JoinID, wire.StatePending, 60*time.Second)
			if err != nil || got.State != wire.StatePending {
				t.Errorf("released with %s %v", got.State, err)
			}
		}()
	}
	waitFor(t, func() bool { return e.svc.Hub().Waiters() == 10 })
	start := time.Now()
	e.svc.Close()
	wg.Wait()
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("close released waiters after %v", el)
	}
	// Later waits answer at once.
	start = time.Now()
	if _, err := e.svc.Wait(context.Background(), keyPin("a"), v.JoinID, wire.StatePending, 60*time.Second); err != nil || time.Since(start) > time.Second {
		t.Errorf("wait after close: %v after %v", err, time.Since(start))
	}
}

func TestHubUnrelatedChangeDoesNotWake(t *testing.T) {
	h := NewHub()
	a := h.Subscribe("a")
	defer a.Cancel()
	h.Notify("b")
	select {
	case <-a.C():
		t.Fatal("woken by another registration's change")
	default:
	}
	h.Notify("a")
	select {
	case <-a.C():
	default:
		t.Fatal("not woken by its own change")
	}
	a.Renew()
	select {
	case <-a.C():
		t.Fatal("a renewed subscription fired at once")
	default:
	}
}
