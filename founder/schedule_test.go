package founder

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"stratum/store"
	"stratum/store/storetest"
)

// TestScheduleRunsLoops: a loop runs at start and on each tick, a later
// loop only from its first tick, a leased loop where the lease is held
// (a bbolt founder's always is), and none after the founder stops.
func TestScheduleRunsLoops(t *testing.T) {
	db, _ := storetest.Temp(t)
	f := &Founder{db: db}
	var now, later, leased atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	f.schedule(ctx,
		loop{name: "now", every: time.Hour, run: func(context.Context) { now.Add(1) }},
		loop{name: "later", every: time.Hour, later: true, run: func(context.Context) { later.Add(1) }},
		loop{name: "leased", every: 20 * time.Millisecond, leased: true, run: func(context.Context) { leased.Add(1) }},
	)
	time.Sleep(200 * time.Millisecond)
	cancel()
	time.Sleep(50 * time.Millisecond)
	stopped := leased.Load()
	time.Sleep(100 * time.Millisecond)
	if now.Load() != 1 || later.Load() != 0 || stopped < 3 || leased.Load() != stopped {
		t.Fatalf("runs: now %d (want 1), later %d (want 0), leased %d then %d (want >= 3, then no more)", now.Load(), later.Load(), stopped, leased.Load())
	}
}

// TestScheduleStepsOnWake: an event-driven loop runs at start, then
// when its step says (never, here) or when woken.
func TestScheduleStepsOnWake(t *testing.T) {
	db, _ := storetest.Temp(t)
	f := &Founder{db: db}
	var steps atomic.Int32
	wake := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.schedule(ctx, loop{name: "event", leased: true, wake: wake, step: func(context.Context) time.Duration {
		steps.Add(1)
		return -1
	}})
	waitFor := func(n int32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); steps.Load() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("steps %d, want %d", steps.Load(), n)
			}
		}
	}
	waitFor(1)
	time.Sleep(100 * time.Millisecond)
	if steps.Load() != 1 {
		t.Fatalf("a step that answered 'only when woken' ran %d times unwoken", steps.Load())
	}
	wake <- struct{}{}
	waitFor(2)
}

// TestEveryMigrationStepLinked: the founder (and so the stratum binary)
// links the code of every domain step of the migrations list.
func TestEveryMigrationStepLinked(t *testing.T) {
	if missing := store.MissingSteps(); len(missing) != 0 {
		t.Fatalf("steps of the migrations list without code in this binary: %v", missing)
	}
}
