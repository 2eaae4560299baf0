package repo

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"stratum/apierr"
	"stratum/semver"
	"stratum/store"
	"stratum/wire"
)

// DefaultConcurrency is the default number of release files read at once.
const DefaultConcurrency = 4

// mirrorConfig configures a Mirror.
type mirrorConfig struct {
	DB      *store.DB
	DataDir string // the founder's data directory; releases live in DataDir/releases
	// Concurrency is how many files are read at once across all joiners
	// (<= 0: DefaultConcurrency).
	Concurrency int
	Limits      ReadLimits
	// CacheBytes bounds the cache of verified chunks shared by all
	// readers (0: DefaultCacheBytes(); < 0: no cache).
	CacheBytes int64
	Log        *slog.Logger
	// Checks is the start-up check's state: a release still to be checked
	// is answered with retry advice (nil: none runs).
	Checks *Checks
}

// Mirror hands joiners the files of imported releases (SPEC 5.3). It owns
// the semaphore that bounds how many files are read at once, and the
// counters of what it refused or found corrupt.
type Mirror struct {
	db  *store.DB
	dir string // dataDir/releases
	// cacheDir is dataDir/release-cache, served from on a shared store.
	cacheDir string
	log      *slog.Logger
	slots    chan struct{}
	checks   *Checks

	limits  ReadLimits
	mu      sync.Mutex
	holders map[string]int // reads in flight per holder
	// waiters are the registrations holding no read that were refused
	// for want of a slot, oldest first (SPEC 16.9): free slots go to them
	// before anyone takes a second one.
	waiters []waiter

	done      chan struct{}
	closeOnce sync.Once
	// readers (mu) are the reads holding a slot, which Close cuts (errShutdown):
	// a read in flight is cut at its next unit.
	readers map[*Reader]struct{}
	indexes indexCache
	stats   statMemo
	files   openFiles   // the files being read, shared by their readers
	cache   *chunkCache // nil: none

	corrupt   atomic.Uint64
	busy      atomic.Uint64
	cuts      atomic.Uint64
	reads     atomic.Uint64
	bytesSent atomic.Uint64
	// cacheHits counts units sent from the cache, cacheMisses units read
	// from disk and hashed.
	cacheHits, cacheMisses atomic.Uint64
}

// newMirror returns a mirror of the releases imported under cfg.DataDir.
func newMirror(cfg mirrorConfig) *Mirror {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultCacheBytes()
	}
	m := &Mirror{
		readers:  map[*Reader]struct{}{},
		db:       cfg.DB,
		dir:      filepath.Join(cfg.DataDir, "releases"),
		log:      cfg.Log,
		slots:    make(chan struct{}, cfg.Concurrency),
		limits:   cfg.Limits.withDefaults(),
		holders:  map[string]int{},
		done:     make(chan struct{}),
		cache:    newChunkCache(cfg.CacheBytes),
		cacheDir: filepath.Join(cfg.DataDir, cacheDirName),
		checks:   cfg.Checks,
	}
	m.stats.listen(cfg.DB)
	return m
}

// Close cuts the reads in flight at their next chunk and refuses new ones
// (UNAVAILABLE): shutdown must not wait for a slow download.
func (m *Mirror) Close() {
	m.closeOnce.Do(func() {
		close(m.done)
		// A read acquired after this lock finds the mirror closed.
		m.mu.Lock()
		readers := make([]*Reader, 0, len(m.readers))
		for rd := range m.readers {
			readers = append(readers, rd)
		}
		m.mu.Unlock()
		for _, rd := range readers {
			rd.cut(errShutdown)
		}
		m.files.closeAll()
	})
}

func (m *Mirror) closed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Offered reports whether release is imported and none of its files has
// been found corrupt: only then can a joiner upgrade from this founder.
func (m *Mirror) Offered(release string) bool {
	if semver.Valid(release) != nil {
		return false
	}
	ok := false
	err := m.db.View(func(tx *store.Tx) error {
		if !bucketReleases.Has(tx, release) {
			return nil
		}
		keys, err := keysWithPrefix(tx, bucketCorrupt, release)
		ok = err == nil && len(keys) == 0
		return err
	})
	return err == nil && ok
}

// UpgradesFrom is the imported release's signed upgradesFrom (empty: it
// upgrades from any release).
func (m *Mirror) UpgradesFrom(release string) []string {
	var r wire.ImportedRelease
	_ = m.db.View(func(tx *store.Tx) error {
		var err error
		r, _, err = bucketReleases.Get(tx, release)
		return err
	})
	return r.UpgradesFrom
}

// CorruptCount is the number of files found corrupt while serving.
func (m *Mirror) CorruptCount() uint64 { return m.corrupt.Load() }

// BusyCount is the number of reads refused because every slot was taken.
func (m *Mirror) BusyCount() uint64 { return m.busy.Load() }

// CutCount is the number of reads cut for being too slow or too long.
func (m *Mirror) CutCount() uint64 { return m.cuts.Load() }

// Reads is the number of file reads started (a slot taken).
func (m *Mirror) Reads() uint64 { return m.reads.Load() }

// BytesSent is the number of verified bytes the readers' callers report
// having sent.
func (m *Mirror) BytesSent() uint64 { return m.bytesSent.Load() }

// CacheHits is the number of verified units sent from the cache.
func (m *Mirror) CacheHits() uint64 { return m.cacheHits.Load() }

// CacheMisses is the number of units read from disk and hashed.
func (m *Mirror) CacheMisses() uint64 { return m.cacheMisses.Load() }

// CacheBytes is the size of the verified units in the cache now.
func (m *Mirror) CacheBytes() int { return int(m.cache.Bytes()) }

// InFlight is the number of slots taken now.
func (m *Mirror) InFlight() int { return len(m.slots) }

// Waiting registrations (SPEC 16.9): at most maxWaiters are kept, and
// one that does not come back within waiterTTL loses its place.
const (
	maxWaiters = 32
	waiterTTL  = 15 * time.Second
)

type waiter struct {
	holder string
	seen   time.Time
}

// acquire takes one of holder's read slots and a slot of the founder, at
// once or not at all: a read waits for no slot (the client is told to
// come back instead). While registrations holding no read wait for a
// slot, a free slot goes to them in the order they came, and nobody
// takes a second one; each waiter's Retry-After tells its place.
// pipelines says whether a long read verifies its next steps on a
// goroutine of its own while it sends (Verified): only while fewer reads
// are in flight than the Go scheduler has processors. With as many reads
// as processors every core already has a read to run, and the second
// goroutine would only move every verified byte from the core that read
// and hashed it to the one that encrypts and sends it.
func (m *Mirror) pipelines() bool { return len(m.slots) < runtime.GOMAXPROCS(0) }

func (m *Mirror) acquire(rd *Reader) error {
	holder := rd.holder
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed() {
		return shuttingDown()
	}
	if m.holders[holder] >= m.limits.PerHolder {
		return m.busyError(fmt.Sprintf("this registration is already reading %d release files, its limit", m.limits.PerHolder))
	}
	if !rd.slot {
		// A small file is sent in about the time a refusal would take:
		// it takes none of the founder's slots and does not queue
		// (smallFileBytes), but counts in the registration's share.
		m.holders[holder]++
		m.readers[rd] = struct{}{}
		return nil
	}
	now := time.Now()
	m.dropStaleWaiters(now)
	place := m.place(holder) // 0: not waiting
	free := cap(m.slots) - len(m.slots)
	switch {
	case m.holders[holder] > 0 && len(m.waiters) > 0:
		return m.busyError(fmt.Sprintf("%d registration(s) wait for their first release file; a second read waits until they have one", len(m.waiters)))
	case place > 0 && place > free:
		m.waiters[place-1].seen = now
		return m.queuedError(place, free, now)
	case place == 0 && len(m.waiters) >= free:
		if m.holders[holder] > 0 || len(m.waiters) >= maxWaiters {
			return m.busyError(fmt.Sprintf("the founder is already sending %d release files, its limit", cap(m.slots)))
		}
		m.waiters = append(m.waiters, waiter{holder: holder, seen: now})
		return m.queuedError(len(m.waiters), free, now)
	}
	select {
	case m.slots <- struct{}{}:
	default:
		return m.busyError(fmt.Sprintf("the founder is already sending %d release files, its limit", cap(m.slots)))
	}
	if place > 0 {
		m.waiters = append(m.waiters[:place-1], m.waiters[place:]...)
	}
	m.holders[holder]++
	m.readers[rd] = struct{}{}
	return nil
}

// place is holder's 1-based place among the waiters, 0 when not waiting.
func (m *Mirror) place(holder string) int {
	for i, w := range m.waiters {
		if w.holder == holder {
			return i + 1
		}
	}
	return 0
}

func (m *Mirror) dropStaleWaiters(now time.Time) {
	kept := m.waiters[:0]
	for _, w := range m.waiters {
		if now.Sub(w.seen) < waiterTTL {
			kept = append(kept, w)
		}
	}
	m.waiters = kept
}

// queuedError tells a waiting registration its place: Retry-After grows
// with it (1 s for the first, at most 5 s). Whole seconds are all the
// header can say, and a slot left free until its waiter comes back is
// the founder's bandwidth lost, so the answer's details also carry the
// place and a finer estimate, retryAfterMs (slotEstimate), which the
// joiner follows; free is the number of slots free now.
func (m *Mirror) queuedError(place, free int, now time.Time) *apierr.Error {
	m.busy.Add(1)
	after := min(place, 5)
	est := min(m.slotEstimate(place-free, now), time.Duration(after)*time.Second)
	return &apierr.Error{
		Code:       apierr.ReleaseBusy,
		Message:    fmt.Sprintf("every release slot is taken; this registration is number %d in line for the next one: retry after the Retry-After delay", place),
		RetryAfter: after,
		Details:    map[string]any{"place": place, "retryAfterMs": est.Milliseconds()},
	}
}

// Bounds of slotEstimate: a waiter is not asked back sooner than
// minSlotPoll (its retries would cost more than a free slot for that
// long), and while the reads in flight tell nothing of when they end, the
// k-th waiter to be served comes back after k x slotPoll.
const (
	minSlotPoll = 50 * time.Millisecond
	slotPoll    = 250 * time.Millisecond
)

// slotEstimate is when the k-th slot to come free (k >= 1) may be free,
// from the reads holding slots now: each ends after its file's unsent
// bytes at the rate it has kept so far (a read that has not sent for a
// tenth of a second yet tells nothing). A slightly early estimate costs
// one more refusal, a late one a slot left idle, so the estimate is
// shortened by a quarter, and never longer than k x slotPoll.
func (m *Mirror) slotEstimate(k int, now time.Time) time.Duration {
	k = max(k, 1)
	guess := time.Duration(k) * slotPoll
	ends := make([]time.Duration, 0, len(m.readers))
	for rd := range m.readers {
		if !rd.slot {
			continue
		}
		took := now.Sub(rd.start)
		sent := rd.sent.Load()
		if took < 100*time.Millisecond || sent <= 0 {
			ends = append(ends, guess)
			continue
		}
		left := max(rd.fi.Size-sent, 0)
		ends = append(ends, time.Duration(float64(left)/float64(sent)*float64(took)))
	}
	if k > len(ends) {
		return max(guess, minSlotPoll)
	}
	slices.Sort(ends)
	return max(min(ends[k-1]*3/4, guess), minSlotPoll)
}

func (m *Mirror) release(rd *Reader) {
	holder := rd.holder
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.readers, rd)
	if m.holders[holder]--; m.holders[holder] <= 0 {
		delete(m.holders, holder)
	}
	if rd.slot {
		<-m.slots
	}
}

func (m *Mirror) busyError(why string) *apierr.Error {
	m.busy.Add(1)
	return &apierr.Error{
		Code:    apierr.ReleaseBusy,
		Message: why + "; retry after the Retry-After delay",
		// Jittered so that joiners refused together do not return together.
		RetryAfter: 1 + rand.IntN(5),
	}
}
