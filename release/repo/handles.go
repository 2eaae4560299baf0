package repo

import (
	"os"
	"sync"
	"time"
)

// openFiles keeps the files being read open, shared by their readers:
// back-to-back ranged reads of one file (a joiner resuming, a client
// reading ranges) opened it each time, a tenth of a 64 KiB range's cost
// (the release directory as an os.Root, the walk inside it, fstat, two
// closes). A handle is shared only while it is young (handleTTL) and
// never after a read through it failed (drop): a file replaced on disk is
// opened afresh soon, and a damaged one at once. Every byte read through
// a shared handle is verified as before, so sharing changes what is read
// from, never what is sent.
type openFiles struct {
	mu      sync.Mutex
	entries map[string]*handle // by file key (import ID NUL release NUL path)
	readers map[string]int     // readers of each file now, by file key
	closed  bool
}

// handle is one open file and the readers using it.
type handle struct {
	f      *os.File
	key    string
	opened time.Time
	refs   int
	// retired: no new reader takes it (too old, dropped, or replaced);
	// it is closed when its last reader is done.
	retired bool
}

const (
	// handleTTL is how long a handle is given to new readers.
	handleTTL = 5 * time.Second
	// maxIdleHandles bounds the handles kept open with no reader.
	maxIdleHandles = 16
)

// take returns a handle on the file at key, shared when a young one is
// open, else opened by open.
func (o *openFiles) take(key string, open func() (*os.File, error)) (*handle, error) {
	now := time.Now()
	o.mu.Lock()
	if h := o.entries[key]; h != nil && !h.retired && now.Sub(h.opened) < handleTTL {
		h.refs++
		o.readers[key]++
		o.mu.Unlock()
		return h, nil
	}
	o.mu.Unlock()
	f, err := open()
	if err != nil {
		return nil, err
	}
	h := &handle{f: f, key: key, opened: now, refs: 1}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.readers == nil {
		o.readers = map[string]int{}
	}
	o.readers[key]++
	if o.closed {
		h.retired = true
		return h, nil
	}
	if o.entries == nil {
		o.entries = map[string]*handle{}
	}
	if old := o.entries[key]; old != nil {
		o.retire(old)
	}
	o.entries[key] = h
	o.sweep(now)
	return h, nil
}

// put gives a reader's handle back.
func (o *openFiles) put(h *handle) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.readers[h.key]--; o.readers[h.key] <= 0 {
		delete(o.readers, h.key)
	}
	h.refs--
	if h.refs == 0 && h.retired {
		h.f.Close()
	}
}

// alone reports whether one reader (the caller) reads the file at key.
func (o *openFiles) alone(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.readers[key] <= 1
}

// drop retires the handle on the file at key: the next reader opens it
// again (a read through it failed).
func (o *openFiles) drop(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h := o.entries[key]; h != nil {
		o.retire(h)
	}
}

// closeAll retires every handle (the mirror is closing).
func (o *openFiles) closeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	for _, h := range o.entries {
		o.retire(h)
	}
}

// retire takes h out of the map; it is closed now if no reader holds it,
// else by the last one's put. o.mu is held.
func (o *openFiles) retire(h *handle) {
	if o.entries[h.key] == h {
		delete(o.entries, h.key)
	}
	h.retired = true
	if h.refs == 0 {
		h.f.Close()
	}
}

// sweep retires the handles too old to be shared and, beyond
// maxIdleHandles, idle ones. o.mu is held.
func (o *openFiles) sweep(now time.Time) {
	idle := 0
	for _, h := range o.entries {
		switch {
		case now.Sub(h.opened) >= handleTTL:
			o.retire(h)
		case h.refs == 0:
			if idle++; idle > maxIdleHandles {
				o.retire(h)
			}
		}
	}
}
