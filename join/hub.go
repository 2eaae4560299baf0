package join

import (
	"sync"
	"sync/atomic"
)

// Hub wakes long-poll waiters when their registration changes.
//
// Each watched registration has one channel; a change closes it (a
// broadcast to every waiter at once) and forgets it, and the next
// Subscribe makes a fresh one. Waiters select on that channel, their own
// timer and context: no goroutine or polling loop exists per waiter, and
// a registration nobody watches costs nothing.
type Hub struct {
	mu     sync.Mutex
	topics map[string]*topic
	done   chan struct{}
	once   sync.Once
}

type topic struct {
	ch   chan struct{}
	refs int
	// watchers are parked long-polls (Watch): callbacks instead of
	// goroutines blocked on ch.
	watchers map[*watcher]struct{}
}

// watcher is one Watch callback; fired guards against a Notify and a
// Close racing to call it twice.
type watcher struct {
	fn func()
	// fired is written under the hub's lock; read without it by cancel,
	// so thousands of answers released at once (shutdown) do not all
	// queue on the lock just to learn they already fired.
	fired atomic.Bool
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{topics: map[string]*topic{}, done: make(chan struct{})}
}

// Sub is one waiter's interest in one registration.
type Sub struct {
	h  *Hub
	id string
	t  *topic
}

// Subscribe registers interest in id. Subscribe before reading the state
// it guards, so a change committed in between is not missed.
func (h *Hub) Subscribe(id string) *Sub {
	s := &Sub{h: h, id: id}
	h.mu.Lock()
	s.t = h.attach(id)
	h.mu.Unlock()
	return s
}

func (h *Hub) attach(id string) *topic {
	t := h.topics[id]
	if t == nil {
		t = &topic{ch: make(chan struct{})}
		h.topics[id] = t
	}
	t.refs++
	return t
}

// detach drops one reference; a notified topic is already forgotten.
func (h *Hub) detach(id string, t *topic) {
	t.refs--
	if t.refs == 0 && h.topics[id] == t {
		delete(h.topics, id)
	}
}

// C is closed when the registration changes.
func (s *Sub) C() <-chan struct{} { return s.t.ch }

// Renew moves the subscription to the registration's current channel,
// after a wake and before re-reading the state.
func (s *Sub) Renew() {
	s.h.mu.Lock()
	s.h.detach(s.id, s.t)
	s.t = s.h.attach(s.id)
	s.h.mu.Unlock()
}

// Cancel ends the subscription.
func (s *Sub) Cancel() {
	s.h.mu.Lock()
	s.h.detach(s.id, s.t)
	s.h.mu.Unlock()
}

// Notify wakes every waiter of each id.
func (h *Hub) Notify(ids ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		if t := h.topics[id]; t != nil {
			close(t.ch)
			delete(h.topics, id)
			h.fire(t)
		}
	}
}

// fire calls each watcher of t once, each on its own goroutine (a callback
// re-reads the store and writes to a connection). Called with h.mu held.
func (h *Hub) fire(t *topic) {
	for w := range t.watchers {
		if !w.fired.Load() {
			w.fired.Store(true)
			go w.fn()
		}
	}
	t.watchers = nil
}

// Watch calls fn once, on its own goroutine, at the next change of id or
// when the hub closes (at once when it already has). The returned cancel
// stops a call that has not started; it reports whether it did. Unlike
// Subscribe, nothing waits meanwhile: a parked long-poll costs its
// connection and this entry.
func (h *Hub) Watch(id string, fn func()) (cancel func() bool) {
	w := &watcher{fn: fn}
	h.mu.Lock()
	select {
	case <-h.done:
		w.fired.Store(true)
		h.mu.Unlock()
		go fn()
		return func() bool { return false }
	default:
	}
	t := h.attach(id)
	if t.watchers == nil {
		t.watchers = map[*watcher]struct{}{}
	}
	t.watchers[w] = struct{}{}
	h.mu.Unlock()
	return func() bool {
		if w.fired.Load() {
			return false
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if w.fired.Load() {
			return false
		}
		w.fired.Store(true)
		delete(t.watchers, w)
		h.detach(id, t)
		return true
	}
}

// NotifyAll wakes every waiter and watcher (they re-read the store): a
// replica that lost its database may have missed notes.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, t := range h.topics {
		close(t.ch)
		delete(h.topics, id)
		h.fire(t)
	}
}

// Done is closed by Close.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Close releases every waiter at once (shutdown); later waits answer at
// once.
func (h *Hub) Close() {
	h.once.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		close(h.done)
		for _, t := range h.topics {
			h.fire(t)
		}
	})
}

// watched is the number of registrations with waiters (tests, metrics).
func (h *Hub) watched() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}

// Waiters counts current subscriptions, for metrics.
func (h *Hub) Waiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, t := range h.topics {
		n += t.refs
	}
	return n
}
