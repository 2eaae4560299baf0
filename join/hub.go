package join

import "sync"

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
		}
	}
}

// Done is closed by Close.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Close releases every waiter at once (shutdown); later waits answer at
// once.
func (h *Hub) Close() { h.once.Do(func() { close(h.done) }) }

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
