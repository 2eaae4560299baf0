package repo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	sha256 "github.com/minio/sha256-simd"

	"stratum/crypto"
	"stratum/store"
	"stratum/wire"
)

// Releases in a shared store (SPEC section 13): when several founder
// replicas share a PostgreSQL database, an import on any replica also puts
// every file's content into the store, in 1 MiB chunks keyed by the
// import. Each replica serves from a local cache under its data directory,
// DIR/release-cache/<import id>/, filled on demand from the store: every
// chunk is checked against the chunk index and the whole file against the
// hash the signed manifest gives, before the file is used. The cache is
// keyed by import, so a re-import on another replica is never answered
// from a stale copy. On a bbolt store nothing changes: the imported tree
// under DIR/releases is what is served.

// cacheDirName is the replica's cache under the data directory.
const cacheDirName = "release-cache"

// contentBatch is how many chunks one write transaction stores: the
// writer lock of the shared store is held briefly, so joins go on during
// a long import.
const contentBatch = 8

func contentPrefix(importID string) string { return importID + "\x00" }

func contentKey(importID, p string, c int64) string {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(c))
	return importID + "\x00" + p + "\x00" + string(n[:])
}

// importMark says an import is storing its content: touched by every
// batch, deleted by the commit that makes the release visible (or by
// dropContent when the import fails). A mark left untouched is what a
// killed import left behind.
type importMark struct {
	Release string    `json:"release"`
	Touched time.Time `json:"touched"`
}

// storeContent puts every indexed file of the tree at dir into the store,
// chunk by chunk; the chunks are unreachable until the record naming
// importID commits.
func storeContent(ctx context.Context, db *store.DB, dir, release, importID string, index map[string]*fileIndex) error {
	type chunk struct {
		key  string
		data []byte
	}
	var pending []chunk
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := db.Update(func(tx *store.Tx) error {
			if err := bucketImports.Put(tx, importID, importMark{Release: release, Touched: time.Now().UTC()}); err != nil {
				return err
			}
			for _, c := range pending {
				if err := bucketContent.Put(tx, c.key, c.data); err != nil {
					return err
				}
			}
			return nil
		})
		pending = pending[:0]
		return err
	}
	paths := make([]string, 0, len(index))
	for p := range index {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		fi := index[p]
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return ioError("read back "+p, err)
		}
		for c := int64(0); c < fi.chunkCount(); c++ {
			if err := ctx.Err(); err != nil {
				f.Close()
				return err
			}
			b := make([]byte, min(ChunkSize, fi.Size-c*ChunkSize))
			if _, err := io.ReadFull(f, b); err != nil {
				f.Close()
				return ioError("read back "+p, err)
			}
			pending = append(pending, chunk{contentKey(importID, p, c), b})
			if len(pending) == contentBatch {
				if err := flush(); err != nil {
					f.Close()
					return fmt.Errorf("store the content of %s: %w", p, err)
				}
			}
		}
		f.Close()
	}
	if err := flush(); err != nil {
		return fmt.Errorf("store release content: %w", err)
	}
	return nil
}

// dropContent removes what an import that did not commit stored.
func dropContent(db *store.DB, importID string) {
	_ = db.Update(func(tx *store.Tx) error { return dropImport(tx, importID) })
}

func dropImport(tx *store.Tx, importID string) error {
	if err := bucketContent.DeletePrefix(tx, contentPrefix(importID)); err != nil {
		return err
	}
	return bucketImports.Delete(tx, importID)
}

// OrphanIdle is how long an import's mark may stay untouched before its
// content counts as left by a killed import (a live import touches it at
// every 8 MiB).
const OrphanIdle = 15 * time.Minute

// collectOrphans removes the content that imports killed before their
// commit left in a shared store: every import mark untouched for idle
// whose import no release record names. The founder holding the
// background lease runs it (SPEC 18); it answers the imports removed.
func collectOrphans(db *store.DB, idle time.Duration) ([]string, error) {
	if !db.KeepsContent() {
		return nil, nil // on bbolt the content is the imported tree
	}
	var stale []string
	err := db.View(func(tx *store.Tx) error {
		live := map[string]bool{}
		if err := bucketReleases.ForEach(tx, func(_ string, r wire.ImportedRelease) error { live[r.ImportID] = true; return nil }); err != nil {
			return err
		}
		return bucketImports.ForEach(tx, func(id string, m importMark) error {
			if !live[id] && time.Since(m.Touched) >= idle {
				stale = append(stale, id)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, id := range stale {
		// One import per transaction; the mark is read again under the
		// writer lock, so an import that resumed is left alone.
		dropped := false
		err := db.Update(func(tx *store.Tx) error {
			m, found, err := bucketImports.Get(tx, id)
			if err != nil || !found || time.Since(m.Touched) < idle {
				return err
			}
			dropped = true
			return dropImport(tx, id)
		})
		if err != nil {
			return removed, err
		}
		if dropped {
			removed = append(removed, id)
		}
	}
	return removed, nil
}

// openFile opens fi's file: from the imported tree, or on a shared store
// from this replica's cache, filled from the store first when the file is
// not there yet.
func (m *Mirror) openFile(fi *FileInfo) (*os.File, error) {
	if !m.db.KeepsContent() {
		return openImported(m.dir, fi.Release, fi.Path, fi.Size)
	}
	dir := filepath.Join(m.cacheDir, fi.index.ImportID)
	target := filepath.Join(dir, filepath.FromSlash(fi.Path))
	if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			// A new import: the caches of imports replaced since go.
			if err := pruneCache(m.db, m.cacheDir); err != nil {
				m.log.Warn("pruning the release cache failed", "err", err)
			}
		}
		if err := m.fill(target, fi); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, ioError("look up the cached "+fi.Path, err)
	}
	f, err := openImported(m.cacheDir, fi.index.ImportID, fi.Path, fi.Size)
	if err != nil && !transient(err) {
		// This replica's copy is not what it verified (damaged on its
		// disk): fill it again from the store, which decides.
		m.evict(fi, err)
		if err := m.fill(target, fi); err != nil {
			return nil, err
		}
		return openImported(m.cacheDir, fi.index.ImportID, fi.Path, fi.Size)
	}
	return f, err
}

// storeContentError: the content in the shared store itself fails
// verification, so the file is corrupt for every replica.
type storeContentError struct{ err error }

func (e storeContentError) Error() string { return e.err.Error() }
func (e storeContentError) Unwrap() error { return e.err }

// fromCache says a verification failure is this replica's cached copy,
// not the release: on a shared store every file is served from the cache,
// filled only with content that verified, so a failure that is not the
// store's content is this disk's. The copy is refilled from the store
// instead of the file being marked corrupt cluster-wide (SPEC 18).
func (m *Mirror) fromCache(cause error) bool {
	var sc storeContentError
	return m.db.KeepsContent() && !errors.As(cause, &sc)
}

// evict removes fi's cached copy, which failed verification; the next
// read fills it again from the store.
func (m *Mirror) evict(fi *FileInfo, cause error) {
	target := filepath.Join(m.cacheDir, fi.index.ImportID, filepath.FromSlash(fi.Path))
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Error("removing a damaged release cache file failed", "release", fi.Release, "path", fi.Path, "err", err)
		return
	}
	m.log.Warn("this replica's cached release file failed verification; refilled from the database", "release", fi.Release, "path", fi.Path, "reason", cause.Error())
}

// fill copies fi's file from the store to target through a temp file,
// verifying each chunk and the whole file before the rename makes it
// visible. Two readers filling the same file at once each write their own
// temp file; the second rename replaces identical bytes.
func (m *Mirror) fill(target string, fi *FileInfo) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return ioError("create the release cache", err)
	}
	// The one atomic writer: a temp file of its own per reader, fsync,
	// rename, directory fsync; nothing is visible until all is verified.
	var fillErr error
	err := crypto.WriteFileAtomicFunc(target, 0o444, func(tmp io.Writer) error {
		fillErr = m.fillFrom(tmp, fi)
		return fillErr
	})
	if err != nil && err != fillErr {
		return ioError("install the release cache", err)
	}
	return err
}

// fillFrom writes fi's file from the store to w, verifying each chunk
// against the index and the whole file against the manifest's hash.
func (m *Mirror) fillFrom(tmp io.Writer, fi *FileInfo) error {
	idx := fi.index
	whole := sha256.New()
	for c := int64(0); c < idx.chunkCount(); c++ {
		if m.closed() {
			return shuttingDown()
		}
		var data []byte
		err := m.db.View(func(tx *store.Tx) error {
			data = bytes.Clone(bucketContent.Get(tx, contentKey(idx.ImportID, fi.Path, c)))
			return nil
		})
		if err != nil {
			return err // the store, not the release: never marked corrupt
		}
		want := min(ChunkSize, idx.Size-c*ChunkSize)
		if int64(len(data)) != want {
			return storeContentError{fmt.Errorf("chunk %d: %d bytes in the store, index says %d", c, len(data), want)}
		}
		if sum := sha256.Sum256(data); !bytes.Equal(sum[:], idx.chunk(c)) {
			return storeContentError{fmt.Errorf("chunk %d in the store: sha256 %x, index says %x", c, sum, idx.chunk(c))}
		}
		whole.Write(data)
		if _, err := tmp.Write(data); err != nil {
			return ioError("write the release cache", err)
		}
	}
	if sum := hex.EncodeToString(whole.Sum(nil)); sum != fi.SHA256 {
		return storeContentError{fmt.Errorf("content in the store: sha256 %s, the manifest says %s", sum, fi.SHA256)}
	}
	return nil
}

// pruneCache removes cached imports no record names any more.
func pruneCache(db *store.DB, cache string) error {
	entries, err := os.ReadDir(cache)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return ioError("read the release cache", err)
	}
	live := map[string]bool{}
	err = db.View(func(tx *store.Tx) error {
		return bucketReleases.ForEach(tx, func(_ string, r wire.ImportedRelease) error { live[r.ImportID] = true; return nil })
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !live[e.Name()] {
			removeTree(filepath.Join(cache, e.Name()))
		}
	}
	return nil
}
