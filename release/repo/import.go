package repo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	sha256 "github.com/minio/sha256-simd"

	"stratum/apierr"
	"stratum/release"
	"stratum/store"
	"stratum/wire"
)

// Progress is told how an import advances: bytes copied so far out of
// total, and the file being copied. It is called from one goroutine.
type Progress func(done, total int64, file string)

// importMu serializes imports in this process. Another process cannot
// import into the same data directory: it would need the store, which
// bbolt locks.
var importMu sync.Mutex

// ImportOptions are the choices of one import.
type ImportOptions struct {
	Progress Progress // nil: none
	Actor    string   // the principal recorded in the audit event
	// Replace allows replacing an imported release of the same version
	// whose content differs.
	Replace bool
}

// importTree verifies the release tree src against keys and copies it into
// dataDir/releases/<release>/ (read-only) with its chunk index in the
// store. The manifest signature is checked first; then each file is
// hashed as it is copied, so the bytes verified are the bytes kept, and
// chunked for the index. The store record, the clearing of the release's
// corrupt marks and the audit event "release.imported" are one
// transaction. On any failure nothing is left behind: no directory, no
// record. A tree that fails verification is a *release.FileError naming
// the first bad file and why; the founder's own disk failing is an
// *IOError.
func importTree(ctx context.Context, db *store.DB, dataDir, src string, keys *release.Keyring, opts ImportOptions) (*release.Manifest, error) {
	importMu.Lock()
	defer importMu.Unlock()

	mb, sb, srcRoot, err := openSource(src)
	if err != nil {
		return nil, err
	}
	defer srcRoot.Close()
	m, err := keys.VerifyManifest(mb, sb)
	if err != nil {
		return nil, err
	}
	if err := release.CheckUnlisted(srcRoot, m); err != nil {
		return nil, err
	}
	manifestSum := hex.EncodeToString(sha256Sum(mb))
	if prev, found, err := getRelease(db, m.Release, nil); err != nil {
		return nil, err
	} else if found {
		if err := checkReplace(prev, manifestSum, opts.Replace); err != nil {
			return nil, err
		}
	}

	releasesDir := filepath.Join(dataDir, "releases")
	if err := os.MkdirAll(releasesDir, 0o755); err != nil {
		return nil, ioError("create the releases directory", err)
	}
	if err := removeStale(db, releasesDir); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(releasesDir, ".import-"+m.Release+"-")
	if err != nil {
		return nil, ioError("create the import directory", err)
	}
	keep := false
	defer func() {
		if !keep {
			removeTree(tmp)
		}
	}()

	index, err := copyTree(ctx, srcRoot, tmp, m, mb, sb, opts.Progress)
	if err != nil {
		return nil, err
	}
	if err := SealTree(tmp); err != nil {
		return nil, ioError("seal the imported tree", err)
	}

	rec := wire.ImportedRelease{
		Release:        m.Release,
		ManifestSHA256: manifestSum,
		ImportID:       randomID(),
		ImportedAt:     time.Now().UTC(),
		CreatedAt:      m.CreatedAt,
		UpgradesFrom:   m.UpgradesFrom,
		Files:          len(m.Files),
		Bytes:          m.TotalSize(),
		SignerKeyIDs:   keys.SignedBy(mb, sb),
	}
	for _, fi := range index {
		fi.ImportID = rec.ImportID
	}
	if db.KeepsContent() {
		// Replicas that did not import fill their caches from the store.
		if err := storeContent(ctx, db, tmp, m.Release, rec.ImportID, index); err != nil {
			dropContent(db, rec.ImportID)
			return nil, err
		}
	}

	// Swap the tree in before committing: a reader that sees the new
	// record then always finds the new files. Should the commit fail, the
	// swap is undone.
	final := filepath.Join(releasesDir, m.Release)
	aside := ""
	if _, err := os.Lstat(final); err == nil {
		aside = filepath.Join(releasesDir, ".old-"+m.Release+"-"+rec.ImportID)
		if err := os.Rename(final, aside); err != nil {
			return nil, ioError("move the previous import of "+m.Release+" aside", err)
		}
	}
	undo := func() {
		if err := os.Rename(final, tmp); err != nil {
			removeTree(final)
		}
		if aside != "" {
			os.Rename(aside, final)
		}
		syncDir(releasesDir)
	}
	if err := os.Rename(tmp, final); err != nil {
		if aside != "" {
			os.Rename(aside, final)
		}
		return nil, ioError("install release "+m.Release, err)
	}
	syncDir(releasesDir)

	err = db.Update(func(tx *store.Tx) error {
		prev, replaced, err := bucketReleases.Get(tx, m.Release)
		if err != nil {
			replaced = true // an unreadable record is replaced all the same
		} else if replaced {
			if err := checkReplace(&prev, manifestSum, opts.Replace); err != nil {
				return err
			}
		}
		if err := bucketReleases.Put(tx, m.Release, rec); err != nil {
			return err
		}
		if err := bucketImports.Delete(tx, rec.ImportID); err != nil {
			return err // its content is the release's now, no orphan
		}
		if replaced && prev.ImportID != "" {
			if err := bucketContent.DeletePrefix(tx, contentPrefix(prev.ImportID)); err != nil {
				return err
			}
		}
		if err := deletePrefix(tx, bucketFiles, m.Release); err != nil {
			return err
		}
		if err := deletePrefix(tx, bucketSubs, m.Release); err != nil {
			return err
		}
		for p, fi := range index {
			if err := putIndex(tx, fileKey(m.Release, p), fi); err != nil {
				return err
			}
			if err := putSubIndex(tx, fileKey(m.Release, p), rec.ImportID, *fi.subs.Load()); err != nil {
				return err
			}
		}
		if err := deletePrefix(tx, bucketCorrupt, m.Release); err != nil {
			return err
		}
		tx.Notify(topicFiles, m.Release)
		return tx.Audit("release.imported", opts.Actor, m.Release, map[string]string{
			"manifestSha256": rec.ManifestSHA256,
			"importId":       rec.ImportID,
			"files":          strconv.Itoa(rec.Files),
			"bytes":          strconv.FormatInt(rec.Bytes, 10),
			"replaced":       strconv.FormatBool(replaced),
			// Another content under the same version: the replace the
			// operator asked for, and what it replaced.
			"contentReplaced":        strconv.FormatBool(replaced && prev.ManifestSHA256 != manifestSum),
			"previousManifestSha256": prev.ManifestSHA256,
		})
	})
	if err != nil {
		undo()
		if db.KeepsContent() {
			dropContent(db, rec.ImportID)
		}
		return nil, fmt.Errorf("record release %s: %w", m.Release, err)
	}
	keep = true
	if aside != "" {
		removeTree(aside)
	}
	return m, nil
}

// copyTree copies every listed file of m from src into dir, verifying
// each as it goes, writes the two payload files, and returns the chunk
// index of every file it wrote (payload files included: they are served).
func copyTree(ctx context.Context, src *os.Root, dir string, m *release.Manifest, mb, sb []byte, progress Progress) (map[string]*fileIndex, error) {
	dst, err := os.OpenRoot(dir)
	if err != nil {
		return nil, ioError("open the import directory", err)
	}
	defer dst.Close()
	total := m.TotalSize() + int64(len(mb)) + int64(len(sb))
	var done int64
	index := make(map[string]*fileIndex, len(m.Files)+2)
	for _, f := range m.Files {
		if progress != nil {
			progress(done, total, f.Path)
		}
		fi, err := copyFile(ctx, src, dst, f, func(n int64) {
			done += n
			if progress != nil {
				progress(done, total, f.Path)
			}
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("import of %s cancelled: %w", m.Release, ctx.Err())
			}
			if isIOError(err) {
				return nil, err
			}
			return nil, &release.FileError{Release: m.Release, Path: f.Path, Reason: err.Error()}
		}
		index[f.Path] = fi
	}
	for _, p := range []struct {
		path string
		b    []byte
	}{{release.ManifestPath, mb}, {release.SignaturePath, sb}} {
		fi, err := writeBytes(dst, p.path, p.b)
		if err != nil {
			return nil, ioError("write "+p.path, err)
		}
		index[p.path] = fi
		done += int64(len(p.b))
	}
	if progress != nil {
		progress(done, total, "")
	}
	return index, nil
}

// copyFile copies one listed file chunk by chunk: each chunk is hashed for
// the index (on another core) while the whole-file hash and the write
// proceed, and the file is accepted only when size and hash match.
func copyFile(ctx context.Context, src, dst *os.Root, f release.File, advance func(int64)) (*fileIndex, error) {
	in, st, err := release.OpenRegular(src, f.Path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if st.Size() != f.Size {
		return nil, fmt.Errorf("size %d bytes, manifest says %d", st.Size(), f.Size)
	}
	if d := path.Dir(f.Path); d != "." {
		if err := dst.MkdirAll(d, 0o755); err != nil {
			return nil, ioError("create the directory of "+f.Path, err)
		}
	}
	out, err := dst.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, ioError("create "+f.Path, err)
	}
	defer out.Close()

	fi := &fileIndex{Size: f.Size, SHA256: f.SHA256}
	fi.Chunks = make([]byte, 0, fi.chunkCount()*32)
	subs := make([]byte, 0, fi.subCount()*32)
	buf := getChunk()
	defer putChunk(buf)
	whole := sha256.New()
	var chunkSum [32]byte
	var wg sync.WaitGroup
	for off := int64(0); off < f.Size; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := (*buf)[:min(ChunkSize, f.Size-off)]
		if _, err := io.ReadFull(in, b); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("shorter than its %d bytes (changed while importing?)", f.Size)
			}
			return nil, fmt.Errorf("read failed: %v", release.UnwrapPath(err))
		}
		wg.Go(func() { chunkSum, subs = indexChunk(b, subs) })
		whole.Write(b)
		_, werr := out.Write(b)
		wg.Wait()
		if werr != nil {
			return nil, ioError("write "+f.Path, werr)
		}
		fi.Chunks = append(fi.Chunks, chunkSum[:]...)
		off += int64(len(b))
		advance(int64(len(b)))
	}
	if n, _ := in.Read((*buf)[:1]); n > 0 {
		return nil, fmt.Errorf("longer than its %d bytes (changed while importing?)", f.Size)
	}
	if sum := hex.EncodeToString(whole.Sum(nil)); sum != f.SHA256 {
		return nil, fmt.Errorf("sha256 %s, manifest says %s", sum, f.SHA256)
	}
	if err := out.Sync(); err != nil {
		return nil, ioError("sync "+f.Path, err)
	}
	if err := out.Close(); err != nil {
		return nil, ioError("close "+f.Path, err)
	}
	fi.subs.Store(&subs)
	return fi, nil
}

// writeBytes writes an in-memory payload file and indexes it.
func writeBytes(dst *os.Root, p string, b []byte) (*fileIndex, error) {
	if err := dst.MkdirAll(path.Dir(p), 0o755); err != nil {
		return nil, err
	}
	out, err := dst.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	if _, err := out.Write(b); err != nil {
		return nil, err
	}
	if err := out.Sync(); err != nil {
		return nil, err
	}
	fi := &fileIndex{Size: int64(len(b)), SHA256: hex.EncodeToString(sha256Sum(b))}
	var subs []byte
	for off := 0; off < len(b); off += ChunkSize {
		var s [32]byte
		s, subs = indexChunk(b[off:min(off+ChunkSize, len(b))], subs)
		fi.Chunks = append(fi.Chunks, s[:]...)
	}
	fi.subs.Store(&subs)
	return fi, out.Close()
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// noReleaseThere is the one answer for a source that cannot be read as a
// signed release tree, whatever the reason: telling "no such path" from
// "permission denied" or "not a directory" would let an API caller map
// the founder's disk.
const noReleaseThere = "no readable signed release tree there (a directory holding payload/manifest.json and payload/manifest.sig, readable by the founder)"

// openSource opens the release tree at src and reads its payload files.
func openSource(src string) (manifest, sig []byte, root *os.Root, err error) {
	// Only a directory is opened: opening a FIFO would wait for a writer.
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return nil, nil, nil, &release.FileError{Reason: noReleaseThere}
	}
	root, err = os.OpenRoot(src)
	if err != nil {
		return nil, nil, nil, &release.FileError{Reason: noReleaseThere}
	}
	manifest, sig, err = release.ReadPayload(root)
	if err != nil {
		root.Close()
		return nil, nil, nil, &release.FileError{Reason: noReleaseThere}
	}
	return manifest, sig, root, nil
}

// checkReplace refuses to replace an imported release by another content
// under the same version unless the caller asked to: joiners may hold
// files of the imported one, and a version must name one content. The
// same content is imported again freely (that is how a file marked
// corrupt is repaired).
func checkReplace(prev *wire.ImportedRelease, manifestSum string, replace bool) error {
	if prev.ManifestSHA256 == manifestSum || replace {
		return nil
	}
	return apierr.New(apierr.Conflict,
		"release %s is already imported with other content (manifest sha256 %s, this tree's %s); a version names one content: to replace it, import again with \"replace\": true (stratum release import --replace)",
		prev.Release, prev.ManifestSHA256, manifestSum)
}
