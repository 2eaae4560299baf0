package repo

import (
	"sync"

	"stratum/internal/hostmem"
)

// The default cache of verified chunks is an eighth of the memory this
// process may use (the machine's, or its cgroup's limit if lower), within
// these bounds: a founder whose rack upgrades at once should keep a whole
// current release image verified in memory, and Go's heap may hold up to
// about twice the cache between collections.
const (
	MinDefaultCacheBytes = 256 << 20
	MaxDefaultCacheBytes = 2 << 30
)

// DefaultCacheBytes is the default size of the cache of verified chunks
// on this machine: an eighth of hostmem.Usable, in whole MiB, at least
// MinDefaultCacheBytes and at most MaxDefaultCacheBytes.
func DefaultCacheBytes() int64 { return defaultCacheFor(hostmem.Usable()) }

func defaultCacheFor(usable int64) int64 {
	return min(max(usable/8&^(1<<20-1), MinDefaultCacheBytes), MaxDefaultCacheBytes)
}

// chunkCache keeps verified units of imported files in memory, bounded in
// bytes, least recently used first out, shared by every reader: joiners
// upgrading together fetch the same chunks at about the same time, and
// the second one is sent what the first verified without reading or
// hashing again.
//
// Why this is safe: an entry holds the verified bytes themselves, copied
// out of the file into memory the cache owns before they were hashed, not
// a "verified" flag about a file that could change under it. Nothing
// writes an entry's bytes after it is filled (eviction only unlinks it),
// so what the cache hands out is exactly what matched the index. The key
// names the import (its random import ID), the file and the unit, so a
// re-imported file, whose readers carry the new import ID, never finds
// the old content; its old entries are never asked for again and age out.
//
// A unit being read is claimed: a second reader wanting it waits for the
// first instead of reading and hashing it too (the downloads of one
// upgrade run in step), and reads it itself only if the first failed.
type chunkCache struct {
	max int64

	mu      sync.Mutex
	used    int64
	entries map[chunkKey]*cacheEntry
	lru     cacheEntry // sentinel: lru.next is the most recently used
}

// chunkKey names one verification unit of one import of a file.
type chunkKey struct {
	file string // import ID NUL release NUL path
	unit int64  // SubChunkSize, or ChunkSize for a file verified by chunk
	n    int64
}

type cacheEntry struct {
	key chunkKey
	// b is nil until the unit is filled; once set it never changes.
	b    []byte
	done chan struct{} // closed when filled or abandoned
	// slab is the buffer b is part of (the units read in one system call),
	// at offset off.
	slab *slab
	off  int
	// prev and next link filled entries in LRU order.
	prev, next *cacheEntry
}

// slab is one buffer read from disk, of which several units in the cache
// may be slices: it stays in memory while any of them is cached, so the
// cache counts its whole size from its first unit filled to its last
// evicted (a slab kept alive by one unit is counted whole, and the cache
// never holds more than its size).
type slab struct {
	size int64
	live int    // its units in the cache
	buf  []byte // the buffer: units that follow each other in it are sent as one piece
}

// newChunkCache returns a cache of at most max bytes; nil (no cache)
// when max <= 0.
func newChunkCache(max int64) *chunkCache {
	if max <= 0 {
		return nil
	}
	c := &chunkCache{max: max, entries: map[chunkKey]*cacheEntry{}}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// get returns the cached bytes of k (hit) with its entry, or an entry:
// claimed by this caller (owner: it must fill or abandon it), or being
// read by another (wait on done, then use b, or read the unit itself if
// b is nil). A filled entry's b, slab and off never change.
func (c *chunkCache) get(k chunkKey) (b []byte, e *cacheEntry, owner bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e = c.entries[k]
	switch {
	case e == nil:
		e = &cacheEntry{key: k, done: make(chan struct{})}
		c.entries[k] = e
		return nil, e, true
	case e.b != nil:
		c.unlink(e)
		c.pushFront(e)
		return e.b, e, false
	default:
		return nil, e, false
	}
}

// fill stores the verified bytes of a claimed entry, s.buf[off:off+len(b)],
// and wakes its waiters; the least recently used entries go to make room.
func (c *chunkCache) fill(e *cacheEntry, b []byte, s *slab, off int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.b = b
	e.slab, e.off = s, off
	close(e.done)
	if s.size > c.max {
		delete(c.entries, e.key)
		return
	}
	c.pushFront(e)
	if s.live++; s.live == 1 {
		c.used += s.size
	}
	for c.used > c.max {
		old := c.lru.prev
		c.unlink(old)
		delete(c.entries, old.key)
		if old.slab.live--; old.slab.live == 0 {
			c.used -= old.slab.size
		}
	}
}

// abandon gives a claimed entry up (its unit failed verification or could
// not be read): its waiters read the unit themselves.
func (c *chunkCache) abandon(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	close(e.done)
}

func (c *chunkCache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *chunkCache) unlink(e *cacheEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

// Bytes is the size of the cached units.
func (c *chunkCache) Bytes() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
