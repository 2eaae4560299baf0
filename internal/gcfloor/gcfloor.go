// Package gcfloor keeps a long-running process's heap goal at a floor:
// Go's default (GOGC=100) collects whenever the heap has doubled since the
// last collection, which for a founder whose live heap is a few MiB means
// a collection every few MiB allocated (every few dozen registrations:
// each TLS handshake allocates about 100 KiB). With a floor the heap may
// fill up to it between collections; once the live heap is above half the
// floor, GOGC=100 holds as before, so large heaps grow no more than they
// did.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// DefaultFloor is the founder's: small beside the memory of any machine
// that runs one, large beside the few MiB its idle heap holds.
const DefaultFloor = 64 << 20

// tuner re-arms itself after every collection (a finalizer runs once the
// collection that found its object unreachable has ended).
type tuner struct {
	floor   uint64
	stopped atomic.Bool
}

type sentinel struct{ _ [64]byte } // not a tiny allocation: its finalizer runs

// Keep sets GOGC after every collection so that the next collection comes
// when the heap reaches floor, or at twice the live heap if that is more.
// An operator's GOGC or GOMEMLIMIT wins: then Keep does nothing. stop
// ends the tuning and restores GOGC=100.
func Keep(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	t := &tuner{floor: floor}
	t.adjust()
	t.arm()
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(100)
	}
}

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	})
}

// adjust sets GOGC from what the last collection found.
func (t *tuner) adjust() {
	live, scan := heapSizes()
	debug.SetGCPercent(percentFor(live, scan, t.floor))
}

// percentFor is the GOGC whose heap goal is floor, never below 100. Go's
// goal is live + scan*GOGC/100, scan being the live heap plus goroutine
// stacks and globals (many parked goroutines weigh there). Before the
// first collection has measured the heap (live 0) it is 100: that
// collection then comes at Go's first goal of 4 MiB.
func percentFor(live, scan, floor uint64) int {
	const most = 100_000
	switch {
	case live == 0 || scan == 0:
		return 100
	case live >= floor:
		return 100
	case (floor-live)/scan >= most/100:
		return most
	}
	return max(100, int((floor-live)*100/scan))
}

// heapSizes reads the live heap and the scannable total (live heap,
// stacks, globals) the last collection measured.
func heapSizes() (live, scan uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	return v[0], v[0] + v[1] + v[2]
}
