package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// Stat looks a file up in the store, without touching the disk and
// without taking a slot. path must be valid and listed in the release's
// index (the manifest's files and the two payload files), else NOT_FOUND;
// a file marked corrupt is RELEASE_CORRUPT until re-imported.
func (m *Mirror) Stat(rel, path string) (*FileInfo, error) {
	if semver.Valid(rel) != nil || release.ValidPath(path) != nil {
		return nil, notFound(rel, path)
	}
	if m.closed() {
		return nil, shuttingDown()
	}
	var fi *fileIndex
	var found, marked bool
	err := m.db.View(func(tx *store.Tx) error {
		var err error
		if tx.GetRaw(bucketReleases, rel) == nil {
			return nil
		}
		raw := tx.GetRaw(bucketFiles, fileKey(rel, path))
		if raw == nil {
			return nil
		}
		found = true
		if fi, err = m.indexes.decode(fileKey(rel, path), raw); err != nil {
			return err
		}
		marked = tx.GetRaw(bucketCorrupt, fileKey(rel, path)) != nil
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, notFound(rel, path)
	case marked:
		return nil, corruptError(rel, path)
	case fi.Size < 0 || int64(len(fi.Chunks)) != fi.chunkCount()*32:
		return nil, damagedIndex(rel, path)
	}
	return &FileInfo{Release: rel, Path: path, Size: fi.Size, SHA256: fi.SHA256, index: fi}, nil
}

// Reader reads one imported file, verifying each chunk against the index
// before returning any byte of it. It holds one of its holder's read
// slots until Close, and is cut (Context) when it stalls, crawls or lasts
// too long.
type Reader struct {
	m        *Mirror
	fi       *FileInfo
	holder   string
	f        *os.File
	buf      *[]byte
	sent     atomic.Int64
	ctx      context.Context
	cancel   context.CancelCauseFunc
	deadline time.Time
	closed   chan struct{}
	once     sync.Once
}

// Open takes a read slot for holder, a registration (RELEASE_BUSY when it
// already holds its share or the founder has none free: a read waits for
// no slot), and opens the file. A file that is not on disk as imported is
// marked corrupt: RELEASE_CORRUPT.
func (m *Mirror) Open(holder string, fi *FileInfo) (*Reader, error) {
	if m.closed() {
		return nil, shuttingDown()
	}
	if err := m.acquire(holder); err != nil {
		return nil, err
	}
	f, err := m.open(fi)
	if err != nil {
		m.release(holder)
		return nil, m.broken(fi, err)
	}
	m.reads.Add(1)
	start := time.Now()
	rd := &Reader{m: m, fi: fi, holder: holder, f: f, buf: getChunk(), deadline: start.Add(m.limits.MaxRead), closed: make(chan struct{})}
	rd.ctx, rd.cancel = context.WithCancelCause(context.Background())
	go rd.watch(start)
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

// Chunk returns the verified bytes of chunk c (ChunkSize bytes, fewer for
// the last one), valid until the next call. A chunk whose hash differs
// from the index marks the file corrupt: RELEASE_CORRUPT, and no byte of
// it is returned.
func (rd *Reader) Chunk(c int64) ([]byte, error) {
	if rd.m.closed() {
		return nil, shuttingDown()
	}
	if err := context.Cause(rd.ctx); err != nil {
		return nil, apierr.New(apierr.Unavailable, "release read cut: %v", err)
	}
	fi := rd.fi.index
	if c < 0 || c >= fi.chunkCount() {
		return nil, io.EOF
	}
	off := c * ChunkSize
	b := (*rd.buf)[:min(ChunkSize, fi.Size-off)]
	if _, err := rd.f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("chunk %d: file shorter than its %d bytes", c, fi.Size)
		} else {
			err = fmt.Errorf("chunk %d: read failed: %w", c, err)
		}
		return nil, rd.m.broken(rd.fi, err)
	}
	if sum := sha256.Sum256(b); !bytes.Equal(sum[:], fi.chunk(c)) {
		err := fmt.Errorf("chunk %d (bytes %d-%d): sha256 %x, index says %x", c, off, off+int64(len(b))-1, sum, fi.chunk(c))
		return nil, rd.m.broken(rd.fi, err)
	}
	return b, nil
}

// ReadAt is io.ReaderAt over verified chunks (one copy; Chunk has none).
func (rd *Reader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= rd.fi.Size {
			return n, io.EOF
		}
		b, err := rd.Chunk(pos / ChunkSize)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], b[pos%ChunkSize:])
	}
	return n, nil
}

// Close gives the slot back.
func (rd *Reader) Close() error {
	rd.once.Do(func() {
		close(rd.closed)
		rd.cancel(nil)
		rd.f.Close()
		putChunk(rd.buf)
		rd.m.release(rd.holder)
	})
	return nil
}

// open opens the release file without following links (os.Root keeps
// every step inside the release directory) and checks it is the regular
// file of the indexed size.
func (m *Mirror) open(fi *FileInfo) (*os.File, error) {
	root, err := os.OpenRoot(filepath.Join(m.dir, fi.Release))
	if err != nil {
		return nil, fmt.Errorf("release directory: %w", err)
	}
	defer root.Close()
	f, st, err := release.OpenRegular(root, fi.Path)
	if err != nil {
		return nil, err
	}
	if st.Size() != fi.Size {
		f.Close()
		return nil, fmt.Errorf("%d bytes on disk, index says %d", st.Size(), fi.Size)
	}
	return f, nil
}

// broken handles a file that cannot be served as imported. A transient
// failure of the founder itself (out of file descriptors or memory) is an
// internal error. Anything else means the tree on disk is not what was
// imported: the file is marked corrupt (unless it was re-imported in the
// meantime: the mismatch was then against the new bytes), logged and
// counted, and the joiner is told RELEASE_CORRUPT.
func (m *Mirror) broken(fi *FileInfo, cause error) error {
	rel, path := fi.Release, fi.Path
	if errors.Is(cause, syscall.EMFILE) || errors.Is(cause, syscall.ENFILE) || errors.Is(cause, syscall.ENOMEM) || errors.Is(cause, syscall.EINTR) {
		m.log.Error("release file cannot be opened", "release", rel, "path", path, "err", cause)
		return fmt.Errorf("release %s: %s: %w", rel, path, cause)
	}
	reason := cause.Error()
	key := fileKey(rel, path)
	importID := fi.index.ImportID
	marked := false
	err := m.db.Update(func(tx *store.Tx) error {
		var now fileIndex
		if found, err := tx.GetJSON(bucketFiles, key, &now); err != nil || !found || now.ImportID != importID {
			return err
		}
		if tx.GetRaw(bucketCorrupt, key) != nil {
			return nil
		}
		marked = true
		if err := tx.PutJSON(bucketCorrupt, key, corruptMark{ImportID: importID, At: time.Now().UTC(), Reason: reason}); err != nil {
			return err
		}
		return tx.Audit("release.corrupt", "", rel, map[string]string{"path": path, "reason": reason, "importId": importID})
	})
	switch {
	case err != nil:
		m.log.Error("release file failed verification; marking it corrupt failed", "release", rel, "path", path, "reason", reason, "err", err)
	case marked:
		m.corrupt.Add(1)
		m.log.Error("release file failed verification; marked corrupt until re-import", "release", rel, "path", path, "reason", reason)
	default:
		m.log.Warn("release file changed while served (re-imported?)", "release", rel, "path", path, "reason", reason)
	}
	return corruptError(rel, path)
}
