package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var batchTestBucket = NewRawBucket("test-batch")

// TestBatchGroupCommit: concurrent Batch calls each see their writes
// durable when they return, their hooks run once after the commit, and a
// failing call changes nothing while the others commit.
func TestBatchGroupCommit(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	const n = 64
	var hooks atomic.Int64
	refused := errors.New("refused by the test")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.Batch(func(tx *Tx) error {
				if err := batchTestBucket.Put(tx, fmt.Sprintf("k%02d", i), []byte("v")); err != nil {
					return err
				}
				tx.OnCommit(func() { hooks.Add(1) })
				if i%8 == 0 {
					return refused
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i%8 == 0) != errors.Is(err, refused) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := hooks.Load(); got != n-n/8 {
		t.Fatalf("%d hooks ran, want %d (one per committed call)", got, n-n/8)
	}
	db.Close()
	db2, err := Open(path, testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	_ = db2.View(func(tx *Tx) error {
		for i := range n {
			got := batchTestBucket.Get(tx, fmt.Sprintf("k%02d", i)) != nil
			if got == (i%8 == 0) {
				t.Errorf("key %d present=%v after reopening", i, got)
			}
		}
		return nil
	})
}

// TestBatchPanicIsItsCallers: a Batch call whose fn panics panics in its
// own caller (as with bbolt's Batch), writes nothing, and the calls
// batched with it still commit.
func TestBatchPanicIsItsCallers(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	defer db.Close()
	const n = 16
	var wg sync.WaitGroup
	panicked := make([]any, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { panicked[i] = recover() }()
			errs[i] = db.Batch(func(tx *Tx) error {
				if err := batchTestBucket.Put(tx, fmt.Sprintf("p%02d", i), []byte("v")); err != nil {
					return err
				}
				if i == 3 {
					panic("boom")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	_ = db.View(func(tx *Tx) error {
		for i := range n {
			got := batchTestBucket.Get(tx, fmt.Sprintf("p%02d", i)) != nil
			if (i == 3) != (panicked[i] != nil) || got == (i == 3) || i != 3 && errs[i] != nil {
				t.Errorf("call %d: panic %v, error %v, written %v", i, panicked[i], errs[i], got)
			}
		}
		return nil
	})
}

// TestBatchLingersOnlyInAStorm: a lone call commits at once, and so does
// the call after it; once a commit was shared, the next one waits for
// lingerCalls calls (lingerMax at most) and takes them in one group.
func TestBatchLingersOnlyInAStorm(t *testing.T) {
	oldMax, oldCalls := lingerMax, lingerCalls
	lingerMax, lingerCalls = time.Minute, 4
	var sizes []int
	var sizesMu sync.Mutex
	commitObserver = func(n int) {
		sizesMu.Lock()
		sizes = append(sizes, n)
		sizesMu.Unlock()
	}
	defer func() { lingerMax, lingerCalls, commitObserver = oldMax, oldCalls, nil }()
	db, _ := openTemp(t, testKey(t))
	defer db.Close()
	g := db.be.(*boltBackend).group
	pending := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.pending)
	}
	waitPending := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); pending() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d calls pending, want %d", pending(), n)
			}
		}
	}
	put := func(key string, hold chan struct{}) error {
		return db.Batch(func(tx *Tx) error {
			if hold != nil {
				<-hold
			}
			return batchTestBucket.Put(tx, key, []byte("v"))
		})
	}
	start := time.Now()
	// Lone calls, one after the other: none waits a minute.
	for _, k := range []string{"lone1", "lone2"} {
		if err := put(k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("two lone calls took %v: a lone call lingered", took)
	}
	// A held commit (a) while b and c arrive; b and c share the next,
	// held too until d is pending; d then waits for e, f, g.
	holdA, holdB := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 7)
	go func() { errs <- put("a", holdA) }()
	waitPending(0)
	time.Sleep(10 * time.Millisecond) // a's commit has taken it
	go func() { errs <- put("b", holdB) }()
	go func() { errs <- put("c", nil) }()
	waitPending(2)
	close(holdA)
	waitPending(0) // b and c are committing, b held
	go func() { errs <- put("d", nil) }()
	waitPending(1)
	close(holdB)
	time.Sleep(50 * time.Millisecond) // b and c commit; d lingers
	if n := pending(); n != 1 {
		sizesMu.Lock()
		defer sizesMu.Unlock()
		t.Fatalf("%d calls pending after the shared commit, want d lingering (groups %v)", n, sizes)
	}
	for _, k := range []string{"e", "f", "g"} {
		go func() { errs <- put(k, nil) }()
	}
	for range 7 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("took %v: the lingering commit waited for its time, not for the calls", took)
	}
	sizesMu.Lock()
	defer sizesMu.Unlock()
	if fmt.Sprint(sizes) != "[1 1 1 2 4]" {
		t.Fatalf("groups %v, want [1 1 1 2 4] (two lone calls, a, b+c, d+e+f+g)", sizes)
	}
}
