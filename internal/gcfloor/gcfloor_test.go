package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name              string
		live, scan, floor uint64
		want              int
	}{
		{"small live heap: goal at the floor", 4 * mib, 4 * mib, 64 * mib, 1500},
		{"stacks count: goal still at the floor", 4 * mib, 40 * mib, 64 * mib, 150},
		{"many stacks: the default", 4 * mib, 200 * mib, 64 * mib, 100},
		{"live at half the floor: the default", 32 * mib, 32 * mib, 64 * mib, 100},
		{"live above the floor: the default", 600 * mib, 600 * mib, 64 * mib, 100},
		{"no collection yet: the default until one measures", 0, 0, 64 * mib, 100},
		{"almost nothing live: the most", 1 << 10, 1 << 10, 64 * mib, 100_000},
	} {
		if got := percentFor(tc.live, tc.scan, tc.floor); got != tc.want {
			t.Errorf("%s: percentFor(%d, %d, %d) = %d, want %d", tc.name, tc.live, tc.scan, tc.floor, got, tc.want)
		}
	}
}

// TestKeepRaisesGOGCAfterCollections: after a collection the tuner has
// set GOGC so that this test's small heap may grow to the floor, and stop
// puts the default back.
func TestKeepRaisesGOGCAfterCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	stop := Keep(256 << 20)
	deadline := time.Now().Add(5 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer runs after the collection
		got = debug.SetGCPercent(-1)
		debug.SetGCPercent(got)
		if got > 100 {
			break
		}
	}
	stop()
	if got <= 100 {
		t.Fatalf("GOGC after collections = %d, want above 100 for a heap of a few MiB under a 256 MiB floor", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Errorf("GOGC after stop = %d, want 100", now)
	}
}
