package join

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/wire"
)

// heapAfterGC is the live heap once garbage is collected (twice, so
// sync.Pool victims are gone too).
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestLongPollNoLeak: thousands of long-polls ended every way a hold ends
// (its timer, its context, a wake that changes nothing, a state change,
// another key's 404) leave no subscription, no goroutine and no heap
// behind. A founder runs for months with fleets of joiners long-polling:
// a few hundred bytes kept per wait would add up to an outage.
func TestLongPollNoLeak(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	pin := keyPin("a")
	bg := context.Background()
	n := 0
	round := func() {
		t.Helper()
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				var err error
				switch i % 4 {
				case 0: // the timer ends it
					_, err = e.svc.Wait(bg, pin, v.JoinID, wire.StatePending, time.Duration(1+i%5)*time.Millisecond)
				case 1: // the client goes away
					ctx, cancel := context.WithTimeout(bg, 2*time.Millisecond)
					_, err = e.svc.Wait(ctx, pin, v.JoinID, wire.StatePending, time.Minute)
					cancel()
				case 2: // woken by changes of nothing it sees, then its timer
					_, err = e.svc.Wait(bg, pin, v.JoinID, wire.StatePending, 20*time.Millisecond)
				case 3: // another key: 404 at once, like an unknown id
					_, err = e.svc.Wait(bg, keyPin("b"), v.JoinID, wire.StatePending, time.Minute)
					if apierr.CodeOf(err) == apierr.NotFound {
						err = nil
					}
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		for range 10 {
			e.svc.Hub().Notify(v.JoinID)
			time.Sleep(2 * time.Millisecond)
		}
		wg.Wait()
		// Fifty waiters on another registration, released by a real
		// state change.
		n++
		key := fmt.Sprintf("r%d", n)
		other := e.pending(key)
		for range 50 {
			wg.Go(func() {
				got, err := e.svc.Wait(bg, keyPin(key), other.JoinID, wire.StatePending, time.Minute)
				if err != nil || got.State != wire.StateRejected {
					t.Errorf("released with %s %v, want rejected", got.State, err)
				}
			})
		}
		waitFor(t, func() bool { return e.svc.Hub().Waiters() == 50 })
		if _, err := e.svc.Reject(e.admin, other.JoinID, "leak test"); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	round() // warm up: lazily built state, pools
	goroutines := runtime.NumGoroutine()
	before := heapAfterGC()
	for range 10 {
		round()
	}
	if w, n := e.svc.Hub().Waiters(), e.svc.Hub().watched(); w != 0 || n != 0 {
		t.Errorf("after every wait ended: %d waiters on %d topics", w, n)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= goroutines })
	after := heapAfterGC()
	grown := int64(after) - int64(before)
	t.Logf("live heap %d -> %d bytes (%+d) over 10 rounds of 250 waits", before, after, grown)
	if grown > 512<<10 {
		t.Errorf("the live heap grew by %d bytes over 2,500 waits (%d per wait): something outlives its long-poll", grown, grown/2500)
	}
}
