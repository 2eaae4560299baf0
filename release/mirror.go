package release

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"stratum/apierr"
	"stratum/semver"
	"stratum/store"
)

// DefaultConcurrency is the default number of release files read at once.
const DefaultConcurrency = 4

// Mirror serves imported releases to joiners (SPEC 5.3). It owns the
// semaphore that bounds how many files are read at once across all
// joiners, and the counters of what it refused or found corrupt.
type Mirror struct {
	db    *store.DB
	dir   string // dataDir/releases
	log   *slog.Logger
	slots chan struct{}

	// ChunkWriteTimeout bounds the write of one chunk to the client, so a
	// reader that stops reading gives its slot back instead of holding it
	// until the server's own timeouts (it replaces the server's write
	// deadline for the rest of the response, which lets a large file take
	// as long as it needs while it keeps moving). Zero means 60 s. Set it
	// before serving.
	ChunkWriteTimeout time.Duration

	done      chan struct{}
	closeOnce sync.Once
	indexes   indexCache

	corrupt   atomic.Uint64
	busy      atomic.Uint64
	responses atomic.Uint64
	bytesSent atomic.Uint64
}

// NewMirror returns a mirror of the releases imported under dataDir with
// concurrency slots (<= 0 means DefaultConcurrency).
func NewMirror(db *store.DB, dataDir string, concurrency int, logger *slog.Logger) *Mirror {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Mirror{
		db:    db,
		dir:   filepath.Join(dataDir, "releases"),
		log:   logger,
		slots: make(chan struct{}, concurrency),
		done:  make(chan struct{}),
	}
}

// Close cuts the responses in flight at their next chunk and refuses new
// ones (UNAVAILABLE): shutdown must not wait for a slow download.
func (m *Mirror) Close() { m.closeOnce.Do(func() { close(m.done) }) }

// Offered reports whether release is imported and none of its files has
// been found corrupt: only then can a joiner upgrade from this founder.
func (m *Mirror) Offered(release string) bool {
	if semver.Valid(release) != nil {
		return false
	}
	ok := false
	err := m.db.View(func(tx *store.Tx) error {
		if tx.GetRaw(bucketReleases, release) == nil {
			return nil
		}
		keys, err := keysWithPrefix(tx, bucketCorrupt, release)
		ok = err == nil && len(keys) == 0
		return err
	})
	return err == nil && ok
}

// CorruptCount is the number of files found corrupt while serving.
func (m *Mirror) CorruptCount() uint64 { return m.corrupt.Load() }

// BusyCount is the number of requests refused because every slot was taken.
func (m *Mirror) BusyCount() uint64 { return m.busy.Load() }

// Responses is the number of 200/206 responses started.
func (m *Mirror) Responses() uint64 { return m.responses.Load() }

// BytesSent is the number of file bytes written to clients.
func (m *Mirror) BytesSent() uint64 { return m.bytesSent.Load() }

// InFlight is the number of slots taken now.
func (m *Mirror) InFlight() int { return len(m.slots) }

// tryAcquire takes a slot if one is free, at once: a request waits for no
// slot (the client is told to come back instead).
func (m *Mirror) tryAcquire() bool {
	select {
	case m.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (m *Mirror) releaseSlot() { <-m.slots }

func (m *Mirror) busyError() *apierr.Error {
	m.busy.Add(1)
	return &apierr.Error{
		Code: apierr.ReleaseBusy,
		Message: fmt.Sprintf("the founder is already sending %d release files, its limit; retry after the Retry-After delay",
			cap(m.slots)),
		// Jittered so that joiners refused together do not return together.
		RetryAfter: 1 + rand.IntN(5),
	}
}

func notFound(release, path string) *apierr.Error {
	return apierr.New(apierr.NotFound, "release %q has no file %q", release, path)
}

func corruptError(release, path string) *apierr.Error {
	return apierr.New(apierr.ReleaseCorrupt,
		"file %s of release %s failed verification on the founder; an operator must re-import the release", path, release)
}
