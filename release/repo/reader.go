package repo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sha256 "github.com/minio/sha256-simd"

	"stratum/apierr"
	"stratum/release"
	"stratum/semver"
	"stratum/store"
)

// FileInfo is one file of an imported release as its index records it:
// what a client is told before any byte is read.
type FileInfo struct {
	Release string
	Path    string
	Size    int64
	SHA256  string // hex; the file's identity
	index   *fileIndex
}

// ETag is the file's strong entity tag, "sha256:<hex>" quoted.
func (fi *FileInfo) ETag() string { return `"sha256:` + fi.SHA256 + `"` }

// Stat looks a file up in the store (or its recent answer, statMemo),
// without touching the disk and without taking a slot. path must be valid and listed in the release's
// index (the manifest's files and the two payload files), else NOT_FOUND;
// a file marked corrupt is RELEASE_CORRUPT until re-imported.
func (m *Mirror) Stat(rel, path string) (*FileInfo, error) {
	if semver.Valid(rel) != nil || release.ValidPath(path) != nil {
		return nil, notFound(rel, path)
	}
	if m.closed() {
		return nil, shuttingDown()
	}
	now := time.Now()
	mk := statKey{rel, path}
	remembered, gen := m.stats.get(mk, now)
	if remembered != nil {
		return remembered, nil
	}
	var fi *fileIndex
	var found, marked bool
	key := fileKey(rel, path) // once: a request's lookups share it
	err := m.db.View(func(tx *store.Tx) error {
		var err error
		if !bucketReleases.Has(tx, rel) {
			return nil
		}
		raw := bucketFiles.Get(tx, key)
		if raw == nil {
			return nil
		}
		found = true
		if fi, err = m.indexes.decode(key, raw); err != nil {
			return err
		}
		if err := loadSubIndex(tx, key, fi); err != nil {
			return err
		}
		marked = bucketCorrupt.Has(tx, key)
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, notFound(rel, path)
	case marked && m.checks.Pending(rel):
		return nil, checkingError(rel)
	case marked:
		return nil, corruptError(rel, path)
	case fi.Size < 0 || int64(len(fi.Chunks)) != fi.chunkCount()*32:
		return nil, damagedIndex(rel, path)
	}
	info := &FileInfo{Release: rel, Path: path, Size: fi.Size, SHA256: fi.SHA256, index: fi}
	m.stats.put(mk, info, gen, now)
	return info, nil
}

// Reader reads one imported file, verifying every unit it returns (a
// 16 KiB sub-chunk; a 1 MiB chunk for a file whose sub-chunk index is
// missing) against the index before returning any byte of it. It holds
// one of its holder's read slots until Close, and is cut (Context) when
// it stalls, crawls or lasts too long.
type Reader struct {
	m      *Mirror
	fi     *FileInfo
	holder string
	h      *handle // the open file, shared with other readers of it
	f      *os.File
	// slot says the read holds one of the founder's slots: a file over
	// smallFileBytes.
	slot     bool
	start    time.Time // when the slot was taken (slotEstimate)
	unit     int64     // the verification unit, SubChunkSize or ChunkSize
	sums     []byte    // the SHA-256 of each unit, concatenated
	key      string    // the file's import, for the cache: import ID NUL release NUL path
	sent     atomic.Int64
	deadline time.Time
	closed   atomic.Bool
	once     sync.Once
	// cutMu guards cause, why the read was cut (nil: it was not), and
	// onCut, called when it is (OnCut).
	cutMu sync.Mutex
	cause error
	onCut func()
	// stopWatch stops the timers that enforce the read's limits.
	stopWatch func()
}

// smallFileBytes is the size up to which a file is read without one of
// the founder's slots: the manifest, its signature and the small files
// of a tree, each sent in one write in less time than a refused request
// and its retry take. Counting them in the semaphore had every joiner
// queue for each of them as for an OS image, while the slots it waited
// for stood idle.
const smallFileBytes = 64 << 10

// Open takes a read slot for holder, a registration (RELEASE_BUSY when it
// already holds its share or the founder has none free: a read waits for
// no slot), and opens the file. A file of at most smallFileBytes takes
// only a place in the registration's share. A file that is not on disk as
// imported is marked corrupt: RELEASE_CORRUPT.
func (m *Mirror) Open(holder string, fi *FileInfo) (*Reader, error) {
	if m.closed() {
		return nil, shuttingDown()
	}
	rd := &Reader{m: m, fi: fi, holder: holder, unit: ChunkSize, sums: fi.index.Chunks,
		key: fi.index.ImportID + "\x00" + fileKey(fi.Release, fi.Path), slot: fi.Size > smallFileBytes, start: time.Now()}
	if err := m.acquire(rd); err != nil {
		return nil, err
	}
	h, err := m.files.take(rd.key, func() (*os.File, error) { return m.openFile(fi) })
	if err != nil {
		m.release(rd)
		return nil, m.broken(fi, err)
	}
	m.reads.Add(1)
	start := time.Now()
	rd.h, rd.f, rd.deadline = h, h.f, start.Add(m.limits.MaxRead)
	if subs := fi.index.subs.Load(); subs != nil {
		rd.unit, rd.sums = SubChunkSize, *subs
	}
	rd.watch(start)
	return rd, nil
}

// Size is the file's size.
func (rd *Reader) Size() int64 { return rd.fi.Size }

// Sent records n bytes of this file sent to the client: the progress the
// minimum rate is measured on.
func (rd *Reader) Sent(n int) {
	rd.sent.Add(int64(n))
	rd.m.bytesSent.Add(uint64(n))
}

// stepBytes is how much a long read verifies per step; a pipelined read
// (Mirror.pipelines) reads and hashes the next steps on another goroutine
// while this one is sent. 256 KiB rather than 1 MiB: each step reaches
// TLS and the client sooner, so the founder's two goroutines and the
// client overlap more, and concurrent reads interleave (one download
// without the cache: 0.96-1.30x in six runs against 0.88-0.98x with 1 MiB
// steps, alternating; four: 0.98-1.13x in eight against 0.84-1.14x; the
// CPU a GiB unchanged). A step is one pread, one group of hashes
// (subSums) and, with gatherconn, one write.
const stepBytes = 256 << 10

// Verified yields the verified bytes of [start, end) of the file in order,
// a unit or part of one at a time. The slices may be shared with other
// readers through the cache: never write to them; without a cache they
// are reused once the loop moves on: never keep them. A unit whose hash
// differs from the index marks the file corrupt and ends the sequence
// with RELEASE_CORRUPT: no byte of it is yielded.
//
// A read longer than one step is pipelined: a goroutine reads and hashes
// the next steps (at most two ahead) while the caller sends this one, so
// hashing and the caller's work (TLS) run on two cores. Each unit is
// still verified before any of its bytes is yielded; the goroutine has
// ended when Verified returns, so the file may be closed then.
func (rd *Reader) Verified(start, end int64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		end = min(end, rd.fi.Size)
		if start < 0 || start >= end {
			return
		}
		first, last := start/rd.unit, (end-1)/rd.unit+1
		// emit yields the part of [start, end) in pieces, which follow
		// each other in the file from unit n on.
		emit := func(n int64, pieces [][]byte) bool {
			off := n * rd.unit
			for _, b := range pieces {
				lo, hi := max(start, off)-off, min(end, off+int64(len(b)))-off
				off += int64(len(b))
				if lo < hi && !yield(b[lo:hi], nil) {
					return false
				}
			}
			return true
		}
		step := max(1, stepBytes/rd.unit)
		// A read longer than the cache would only evict its own units
		// before anyone used them while no other reader reads the file:
		// it then reads past the cache (scan resistance), as without one.
		long := rd.m.cache != nil && end-start > rd.m.cache.max
		cached := func() bool { return rd.m.cache != nil && (!long || !rd.m.files.alone(rd.key)) }
		if last-first <= step || !rd.m.pipelines() {
			for n := first; n < last; n += step {
				units, done, err := rd.units(n, min(n+step, last), cached())
				sent := emit(n, units)
				if sent && err != nil {
					yield(nil, err)
				}
				done()
				if !sent || err != nil {
					return
				}
			}
			return
		}
		type verified struct {
			n     int64
			units [][]byte
			err   error
			done  func()
		}
		ahead := make(chan verified, 1)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(ahead)
			for n := first; n < last; n += step {
				units, done, err := rd.units(n, min(n+step, last), cached())
				select {
				case ahead <- verified{n, units, err, done}:
				case <-stop:
					return
				}
				if err != nil {
					return
				}
			}
		})
		defer func() {
			close(stop)
			wg.Wait()
		}()
		for v := range ahead {
			if !emit(v.n, v.units) {
				return
			}
			v.done()
			if v.err != nil {
				yield(nil, v.err)
				return
			}
		}
	}
}

// units returns the verified bytes of units [first, last), in pieces
// that follow each other in the file (one slice per unit, or one for a
// run read past the cache): from the cache when they are there (or being
// read by another reader, which is waited for), else read and hashed
// here and added to it; with cached false (no cache, or a long read alone
// on its file), read and hashed past the cache. On a failure it returns
// the bytes verified before the first unit that failed, and the error.
// done is called once the bytes are sent: past the cache they are read
// into a pooled buffer (a fresh 64 KiB buffer per range, and the
// collector behind it, was a fifth of a small range's cost), which done
// gives back.
func (rd *Reader) units(first, last int64, cached bool) (_ [][]byte, done func(), _ error) {
	done = func() {}
	if rd.m.closed() {
		return nil, done, shuttingDown()
	}
	if err := rd.cutCause(); err != nil {
		return nil, done, apierr.New(apierr.Unavailable, "release read cut: %v", err)
	}
	out := make([][]byte, last-first)
	c := rd.m.cache
	if !cached {
		// The verified units are one run of the buffer: handed on as one
		// piece (a 64 KiB range is then one write to TLS, in full
		// records, not one per unit).
		buf := runBuffers.Get().(*[]byte)
		n, err := rd.readUnitsInto(first, out, buf)
		verified := 0
		for _, b := range out[:n] {
			verified += len(b)
		}
		return [][]byte{(*buf)[:verified]}, func() { runBuffers.Put(buf) }, err
	}
	// ents[i] is unit i's entry: a hit, claimed by this reader, or being
	// read by another.
	ents := make([]*cacheEntry, len(out))
	claimed := make([]bool, len(out))
	for i := range out {
		b, e, owner := c.get(chunkKey{file: rd.key, unit: rd.unit, n: first + int64(i)})
		ents[i], claimed[i] = e, owner
		if b != nil {
			out[i] = b
			rd.m.cacheHits.Add(1)
		}
	}
	// Claimed units are read and filled (or given up) a run at a time (up
	// to slabUnits, one system call), before anything is waited for: a
	// reader waiting for a unit gets it soon after it is verified, and a
	// reader never waits while holding a claim, so two readers never wait
	// on each other.
	bad := len(out) // the first unit that failed
	var err error
	for i := 0; i < len(out); {
		if !claimed[i] {
			i++
			continue
		}
		j := i + 1
		for j < len(out) && j-i < slabUnits && claimed[j] {
			j++
		}
		var run []byte
		if err == nil {
			var n int
			if run, n, err = rd.readUnits(first+int64(i), out[i:j]); err != nil {
				bad = i + n
			}
		}
		s := &slab{size: rd.runBytes(first+int64(i), j-i), buf: run}
		for k := i; k < j; k++ {
			if k < bad {
				c.fill(ents[k], out[k], s, int(int64(k-i)*rd.unit))
			} else {
				c.abandon(ents[k])
			}
		}
		i = j
	}
	for i := 0; i < bad; i++ {
		e := ents[i]
		if claimed[i] || out[i] != nil {
			continue
		}
		<-e.done
		if e.b != nil {
			out[i] = e.b
			rd.m.cacheHits.Add(1)
			continue
		}
		// The other reader gave the unit up: read it here, which reports
		// the failure (or finds the unit sound after all).
		ents[i] = nil // not the cache's bytes
		if _, _, rerr := rd.readUnits(first+int64(i), out[i:i+1]); rerr != nil {
			bad, err = i, rerr
		}
	}
	return joinSlabRuns(out[:bad], ents), done, err
}

// joinSlabRuns joins, in place, the units of out that follow each other
// in one slab (read in one system call) into one piece: a range or a
// download sent from the cache then goes to TLS in as few writes, and
// full records, as one read past the cache. Each joined piece is exactly
// the bytes of its units, each verified. ents[i] is the cache entry whose
// bytes out[i] are (nil: not from the cache).
func joinSlabRuns(out [][]byte, ents []*cacheEntry) [][]byte {
	joined := out[:0]
	var s *slab // the slab of the last joined piece, and its place in it
	var from, to int
	for i, b := range out {
		e := ents[i]
		if e != nil && e.slab != nil && e.slab == s && e.off == to {
			to += len(b)
			joined[len(joined)-1] = s.buf[from:to:to]
			continue
		}
		joined = append(joined, b)
		s = nil
		if e != nil && e.slab != nil {
			s, from, to = e.slab, e.off, e.off+len(b)
		}
	}
	return joined
}

// slabUnits is how many claimed units a cached read reads at most in one
// system call, into one buffer (a slab, which the cache counts whole
// while any of its units is cached): a step's, as a read without the
// cache does, instead of one call per 16 KiB unit.
const slabUnits = stepBytes / SubChunkSize

// runBytes is the size of units [first, first+n) of the file.
func (rd *Reader) runBytes(first int64, n int) int64 {
	start := first * rd.unit
	return max(0, min(int64(n)*rd.unit, rd.fi.Size-start))
}

// readUnits reads units first, first+1, ... into one fresh buffer, run
// (out[i] gets unit first+i, a slice of it), and checks each against the
// index, stopping at the first that fails; n units were verified. The
// buffer is new because its units may go into the cache, which hands
// them to other readers: a buffer is never reused.
func (rd *Reader) readUnits(first int64, out [][]byte) (run []byte, n int, err error) {
	n, err = rd.readUnitsInto(first, out, &run)
	return run, n, err
}

// runBuffers are the buffers of reads that no cache keeps.
var runBuffers = sync.Pool{New: func() any { return new([]byte) }}

// readUnitsInto is readUnits reading into *buf (a new buffer when it is
// too small): the units are valid only until *buf is reused.
func (rd *Reader) readUnitsInto(first int64, out [][]byte, buf *[]byte) (n int, err error) {
	size := rd.fi.Size
	defer func() { rd.m.cacheMisses.Add(uint64(n)) }()
	// One read for the run (16 KiB units made one system call each a
	// large share of a download's cost); each unit is its own slice of it.
	start := first * rd.unit
	runLen := rd.runBytes(first, len(out))
	if int64(cap(*buf)) < runLen {
		*buf = make([]byte, runLen)
	}
	run := (*buf)[:runLen]
	got, rerr := rd.f.ReadAt(run, start)
	// Sub-chunks are hashed a group at a time (subSums: up to 16 units
	// together, their BLAKE3 parents merged 16 at a time across units),
	// each group once its units are read, and each unit's hash compared
	// before any byte of it is handed on, as before.
	var sums [slabUnits * 32]byte // the hashes of units group.. of out
	group := -1
	for i := range out {
		u := first + int64(i)
		off := u * rd.unit
		lo, hi := off-start, min(off-start+rd.unit, int64(len(run)))
		b := run[lo:hi:hi] // a unit's slice never reaches into the next
		if int64(got) < off-start+int64(len(b)) {
			err := rerr
			if err == nil {
				err = io.EOF
			}
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("bytes %d-%d: file shorter than its %d bytes", off, off+int64(len(b))-1, size)
			} else {
				err = fmt.Errorf("bytes %d-%d: read failed: %w", off, off+int64(len(b))-1, err)
			}
			return i, rd.m.broken(rd.fi, err)
		}
		want := rd.sums[u*32 : u*32+32]
		var sum []byte
		name := "sha256"
		if rd.unit == SubChunkSize {
			if group < 0 || i-group == slabUnits {
				group = i
				subSums(sums[:], run[lo:min(int64(got), lo+slabUnits*SubChunkSize)])
			}
			sum, name = sums[(i-group)*32:(i-group)*32+32], subHash
		} else {
			s := sha256.Sum256(b)
			sum = s[:]
		}
		if !bytes.Equal(sum, want) {
			// A copy: sum's array stays on the stack.
			err := fmt.Errorf("bytes %d-%d: %s %x, index says %x", off, off+int64(len(b))-1, name, bytes.Clone(sum), want)
			return i, rd.m.broken(rd.fi, err)
		}
		out[i] = b
	}
	return len(out), nil
}

// ReadAt is io.ReaderAt over verified bytes.
func (rd *Reader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for b, err := range rd.Verified(off, off+int64(len(p))) {
		if err != nil {
			return n, err
		}
		n += copy(p[n:], b)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Close gives the slot back.
func (rd *Reader) Close() error {
	rd.once.Do(func() {
		rd.closed.Store(true)
		rd.stopWatch()
		rd.OnCut(nil)
		rd.m.files.put(rd.h)
		rd.m.release(rd)
	})
	return nil
}

// openImported opens file path of an imported release without following
// links (os.Root keeps every step inside the release directory) and
// checks it is the regular file of the indexed size.
func openImported(releasesDir, rel, path string, size int64) (*os.File, error) {
	root, err := os.OpenRoot(filepath.Join(releasesDir, rel))
	if err != nil {
		return nil, fmt.Errorf("release directory: %w", err)
	}
	defer root.Close()
	f, st, err := release.OpenRegular(root, path)
	if err != nil {
		return nil, err
	}
	if st.Size() != size {
		f.Close()
		return nil, fmt.Errorf("%d bytes on disk, index says %d", st.Size(), size)
	}
	return f, nil
}

// transient tells a failure of the founder itself (out of file
// descriptors or memory) from a tree that is not what was imported.
func transient(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EINTR)
}

// broken handles a file that cannot be served as imported. A transient
// failure is an internal error. Anything else means the tree on disk is
// not what was imported: the file is marked corrupt (unless it was
// re-imported in the meantime: the mismatch was then against the new
// bytes), logged and counted, and the joiner is told RELEASE_CORRUPT.
func (m *Mirror) broken(fi *FileInfo, cause error) error {
	rel, path := fi.Release, fi.Path
	// Whatever the cause, the next read opens the file again.
	m.files.drop(fi.index.ImportID + "\x00" + fileKey(rel, path))
	if transient(cause) || isIOError(cause) || errors.Is(cause, store.ErrUnavailable) {
		// Also the founder's own disk (filling its cache) or its
		// database: not the release's fault.
		m.log.Error("release file cannot be opened", "release", rel, "path", path, "err", cause)
		return fmt.Errorf("release %s: %s: %w", rel, path, cause)
	}
	if m.fromCache(cause) {
		// This replica's copy, not the release: the next read refills it.
		m.evict(fi, cause)
		return m.busyError(fmt.Sprintf("file %s of release %s is being fetched again from the database", path, rel))
	}
	reason := markReason(m.dir, rel, path, cause)
	marked, err := markCorrupt(m.db, rel, path, fi.index.ImportID, reason)
	switch {
	case err != nil:
		m.log.Error("release file failed verification; marking it corrupt failed", "release", rel, "path", path, "reason", reason, "err", err)
	case marked:
		m.corrupt.Add(1)
		m.log.Error("release file failed verification; marked corrupt until re-import", "release", rel, "path", path, "reason", reason)
	default:
		m.log.Warn("release file changed while served (re-imported?)", "release", rel, "path", path, "reason", reason)
	}
	if m.checks.Pending(rel) {
		// The start-up check has not reached this release: the joiner
		// retries, and hears RELEASE_CORRUPT once it has.
		return checkingError(rel)
	}
	return corruptError(rel, path)
}

// markCorrupt marks file path of rel corrupt and audits it, if the store
// still holds the import that failed (importID) and it is not marked yet;
// marked says whether this call marked it.
func markCorrupt(db *store.DB, rel, path, importID, reason string) (marked bool, err error) {
	key := fileKey(rel, path)
	err = db.Update(func(tx *store.Tx) error {
		if now, err := storedIndex(tx, key); err != nil || now == nil || now.ImportID != importID {
			return err
		}
		if bucketCorrupt.Has(tx, key) {
			return nil
		}
		marked = true
		if err := bucketCorrupt.Put(tx, key, corruptMark{ImportID: importID, At: time.Now().UTC(), Reason: reason}); err != nil {
			return err
		}
		tx.Notify(topicFiles, rel)
		return tx.Audit("release.corrupt", "", rel, map[string]string{"path": path, "reason": reason, "importId": importID})
	})
	return marked && err == nil, err
}
