package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"stratum/store"
)

// upgradeIndexes gives every imported file the sub-chunk index of its
// import when it has none: imports made before the index existed. The
// founder runs it at start, after Recover has settled the trees and
// before serving.
//
// Each file is read once, and every 1 MiB chunk is checked against the
// chunk index of its import before its sub-chunks are hashed: the new
// index is taken only of bytes equal to those verified at import, so a
// file damaged on disk since is never indexed as good. Such a file is
// marked corrupt, as a read of it would have marked it. Each file's index
// is committed in its own transaction, only while the store still names
// the same import; a crash part-way leaves the files not yet done to the
// next start, which does them (a file without its sub-chunk index is
// served all the same, verified by 1 MiB chunk).
func upgradeIndexes(ctx context.Context, db *store.DB, dataDir string, log *slog.Logger) error {
	importMu.Lock()
	defer importMu.Unlock()
	todo, err := filesWithoutSubIndex(db)
	if err != nil || len(todo) == 0 {
		return err
	}
	var total int64
	for _, t := range todo {
		total += t.fi.Size
	}
	log.Info("indexing the 16 KiB sub-chunks of imported release files (BLAKE3; once)", "files", len(todo), "bytes", total)
	start := time.Now()
	releasesDir := filepath.Join(dataDir, "releases")
	var done, corrupt int
	for _, t := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, path, _ := strings.Cut(t.key, "\x00")
		subs, err := subIndexOf(ctx, releasesDir, rel, path, t.fi)
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			return err
		case err != nil && (transient(err) || db.KeepsContent() && errors.Is(err, fs.ErrNotExist)):
			// On a shared store another replica may hold the tree.
			log.Error("release file cannot be indexed now; it is served verified by 1 MiB chunk", "release", rel, "path", path, "err", err)
			continue
		case err != nil:
			corrupt++
			if _, merr := markCorrupt(db, rel, path, t.fi.ImportID, err.Error()); merr != nil {
				return merr
			}
			log.Error("release file failed verification while indexing; marked corrupt until re-import", "release", rel, "path", path, "reason", err)
			continue
		}
		err = db.Update(func(tx *store.Tx) error {
			if now, err := storedIndex(tx, t.key); err != nil || now == nil || now.ImportID != t.fi.ImportID {
				return err
			}
			tx.Notify(topicFiles, rel)
			return putSubIndex(tx, t.key, t.fi.ImportID, subs)
		})
		if err != nil {
			return fmt.Errorf("record the sub-chunk index of %s %s: %w", rel, path, err)
		}
		done++
	}
	log.Info("release sub-chunk indexes done", "files", done, "corrupt", corrupt, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

type indexTodo struct {
	key string
	fi  *fileIndex
}

// filesWithoutSubIndex lists the files, not marked corrupt, whose
// sub-chunk index is missing or of another import.
func filesWithoutSubIndex(db *store.DB) ([]indexTodo, error) {
	var todo []indexTodo
	err := db.View(func(tx *store.Tx) error {
		return bucketFiles.ForEach(tx, func(key string, raw []byte) error {
			fi := new(fileIndex)
			if err := json.Unmarshal(raw, fi); err != nil {
				return fmt.Errorf("release file index %q: %w", key, err)
			}
			if bucketCorrupt.Has(tx, key) {
				return nil
			}
			if sums, err := storedSubs(tx, key, fi); err != nil || sums != nil {
				return err
			}
			todo = append(todo, indexTodo{key: key, fi: fi})
			return nil
		})
	})
	return todo, err
}

// subIndexOf reads the file once, checks each chunk against fi and
// returns the hashes of its sub-chunks. An error that is not transient
// means the file is not what was imported.
func subIndexOf(ctx context.Context, releasesDir, rel, path string, fi *fileIndex) ([]byte, error) {
	if fi.Size < 0 || int64(len(fi.Chunks)) != fi.chunkCount()*32 {
		return nil, errors.New("the chunk index is damaged")
	}
	f, err := openImported(releasesDir, rel, path, fi.Size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := getChunk()
	defer putChunk(buf)
	subs := make([]byte, 0, fi.subCount()*32)
	for c := range fi.chunkCount() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		off := c * ChunkSize
		b := (*buf)[:min(ChunkSize, fi.Size-off)]
		if _, err := f.ReadAt(b, off); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("chunk %d: file shorter than its %d bytes", c, fi.Size)
			}
			return nil, fmt.Errorf("chunk %d: read failed: %w", c, err)
		}
		var sum [32]byte
		sum, subs = indexChunk(b, subs)
		if !bytes.Equal(sum[:], fi.chunk(c)) {
			return nil, fmt.Errorf("chunk %d (bytes %d-%d): sha256 %x, index says %x", c, off, off+int64(len(b))-1, sum, fi.chunk(c))
		}
	}
	return subs, nil
}
