package join

import (
	"sync"

	"stratum/apierr"
)

// MaxHoldsPerRegistration caps the long-polls one registration holds at
// once (SPEC 10.10): a joiner needs one; a key that opens hundreds would
// hold a connection and a waiter each for a minute at a time.
const MaxHoldsPerRegistration = 4

// holdCounter counts held long-polls per registration.
type holdCounter struct {
	mu    sync.Mutex
	limit int
	n     map[string]int
}

func newHoldCounter(limit int) *holdCounter {
	return &holdCounter{limit: limit, n: map[string]int{}}
}

// acquire takes one of joinID's holds, or answers TOO_MANY_REQUESTS.
func (h *holdCounter) acquire(joinID string) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[joinID] >= h.limit {
		e := apierr.New(apierr.TooManyRequests, "registration %s already holds %d long-polls: wait for one to answer", joinID, h.limit)
		e.RetryAfter = 1
		return nil, e
	}
	h.n[joinID]++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.n[joinID]--; h.n[joinID] == 0 {
			delete(h.n, joinID)
		}
	}, nil
}
