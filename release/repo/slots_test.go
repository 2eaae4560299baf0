package repo

import (
	"io"
	"testing"
	"time"

	"stratum/apierr"
)

// TestSmallFilesTakeNoSlot: with the founder's only slot taken, a file of
// at most smallFileBytes is still served (it neither takes a slot nor
// queues), but it counts in its registration's share of two; a large file
// is refused, its waiter told its place and an estimate finer than
// Retry-After.
func TestSmallFilesTakeNoSlot(t *testing.T) {
	m, blob, _, _ := importedMirror(t, 3*ChunkSize, 1, 0)
	big, err := m.Stat("0.6.0", blob)
	if err != nil {
		t.Fatal(err)
	}
	small, err := m.Stat("0.6.0", "os/index.json")
	if err != nil || small.Size > smallFileBytes {
		t.Fatalf("Stat of the small file: %+v %v", small, err)
	}
	held, err := m.Open("a", big)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	rd, err := m.Open("b", small)
	if err != nil {
		t.Fatalf("a small file while every slot is taken: %v", err)
	}
	if got, err := io.ReadAll(io.NewSectionReader(rd, 0, rd.Size())); err != nil || string(got) != `{"layers":1}` {
		t.Fatalf("small file: %q %v", got, err)
	}
	if m.InFlight() != 1 {
		t.Fatalf("%d slots taken with a small read open, want 1", m.InFlight())
	}
	rd.Close()

	// The share of a registration counts small reads too.
	second, err := m.Open("a", small)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("a", small); apierr.CodeOf(err) != apierr.ReleaseBusy {
		t.Fatalf("a third read of one registration: %v, want RELEASE_BUSY", err)
	}
	second.Close()

	_, err = m.Open("c", big)
	e, ok := err.(*apierr.Error)
	if !ok || e.Code != apierr.ReleaseBusy || e.RetryAfter != 1 {
		t.Fatalf("a large file with no slot free: %v, want RELEASE_BUSY with Retry-After 1", err)
	}
	ms, _ := e.Details["retryAfterMs"].(int64)
	if e.Details["place"] != 1 || ms < minSlotPoll.Milliseconds() || ms > 1000 {
		t.Fatalf("the waiter's details %v, want place 1 and retryAfterMs in [%d, 1000]", e.Details, minSlotPoll.Milliseconds())
	}
	if m.InFlight() != 1 {
		t.Fatalf("%d slots taken, want 1", m.InFlight())
	}
}

// TestSlotEstimate: the k-th slot to come free is estimated from the
// rates of the reads holding slots, shortened by a quarter, never past k x
// slotPoll nor under minSlotPoll; reads too young to tell count as k x
// slotPoll.
func TestSlotEstimate(t *testing.T) {
	m, _, _, _ := importedMirror(t, ChunkSize, 4, 0)
	now := time.Now()
	read := func(size, sent int64, age time.Duration) {
		rd := &Reader{m: m, fi: &FileInfo{Size: size}, slot: true, start: now.Add(-age)}
		rd.sent.Store(sent)
		m.readers[rd] = struct{}{}
	}
	// Ends in 1 s (half sent in 1 s), 100 ms, 3 s; one too young to tell.
	read(2<<20, 1<<20, time.Second)
	read(11<<20, 10<<20, time.Second)
	read(4<<20, 1<<20, time.Second)
	read(1<<20, 0, 10*time.Millisecond)
	m.readers[&Reader{m: m, fi: &FileInfo{Size: 100}, slot: false, start: now}] = struct{}{} // no slot: not counted
	for _, tc := range []struct {
		k    int
		want time.Duration
	}{
		{1, 75 * time.Millisecond},  // 100 ms x 3/4
		{2, 375 * time.Millisecond}, // the young read, 2 x 250 ms, x 3/4
		{3, 750 * time.Millisecond}, // 1 s x 3/4 (the young read is 750 ms)
		{4, time.Second},            // 3 s x 3/4, capped at 4 x 250 ms
		{5, 1250 * time.Millisecond},
		{0, 75 * time.Millisecond}, // as k = 1
	} {
		got := m.slotEstimate(tc.k, now)
		if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("slot %d: %v, want %v", tc.k, got, tc.want)
		}
	}
	clear(m.readers)
	if got := m.slotEstimate(1, now); got != slotPoll {
		t.Errorf("no read in flight: %v, want %v", got, slotPoll)
	}
}
