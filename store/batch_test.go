package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
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
