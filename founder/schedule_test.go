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

// TestEveryMigrationStepLinked: the founder (and so the stratum binary)
// links the code of every domain step of the migrations list.
func TestEveryMigrationStepLinked(t *testing.T) {
	if missing := store.MissingSteps(); len(missing) != 0 {
		t.Fatalf("steps of the migrations list without code in this binary: %v", missing)
	}
}
