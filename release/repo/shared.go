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
	"path"
	"path/filepath"
	"slices"

	sha256 "github.com/minio/sha256-simd"

	"stratum/store"
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

// storeContent puts every indexed file of the tree at dir into the store,
// chunk by chunk; the chunks are unreachable until the record naming
// importID commits.
func storeContent(ctx context.Context, db *store.DB, dir, importID string, index map[string]*fileIndex) error {
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
	_ = db.Update(func(tx *store.Tx) error { return bucketContent.DeletePrefix(tx, contentPrefix(importID)) })
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
	return openImported(m.cacheDir, fi.index.ImportID, fi.Path, fi.Size)
}

// fill copies fi's file from the store to target through a temp file,
// verifying each chunk and the whole file before the rename makes it
// visible. Two readers filling the same file at once each write their own
// temp file; the second rename replaces identical bytes.
func (m *Mirror) fill(target string, fi *FileInfo) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return ioError("create the release cache", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".fill-"+path.Base(fi.Path)+"-*")
	if err != nil {
		return ioError("create a release cache file", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
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
			return fmt.Errorf("chunk %d: %d bytes in the store, index says %d", c, len(data), want)
		}
		if sum := sha256.Sum256(data); !bytes.Equal(sum[:], idx.chunk(c)) {
			return fmt.Errorf("chunk %d in the store: sha256 %x, index says %x", c, sum, idx.chunk(c))
		}
		whole.Write(data)
		if _, err := tmp.Write(data); err != nil {
			return ioError("write the release cache", err)
		}
	}
	if sum := hex.EncodeToString(whole.Sum(nil)); sum != fi.SHA256 {
		return fmt.Errorf("content in the store: sha256 %s, the manifest says %s", sum, fi.SHA256)
	}
	if err := tmp.Sync(); err != nil {
		return ioError("sync the release cache", err)
	}
	if err := tmp.Chmod(0o444); err != nil {
		return ioError("seal the release cache", err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return ioError("install the release cache", err)
	}
	syncDir(filepath.Dir(target))
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
		return bucketReleases.ForEach(tx, func(_ string, r Imported) error { live[r.ImportID] = true; return nil })
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
