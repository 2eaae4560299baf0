package bench

import (
	"sync"
	"sync/atomic"
)

// concurrently calls do(i) for every i in [lo, hi) from workers
// goroutines, each taking the next index; it stops handing out indexes at
// the first error and returns it.
func concurrently(workers, lo, hi int, do func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(lo))
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for failed.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= hi {
					return
				}
				if err := do(i); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}
