package release

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sha256 "github.com/minio/sha256-simd"

	"stratum/semver"
	"stratum/store"
)

// Progress is told how an import advances: bytes copied so far out of
// total, and the file being copied. It is called from one goroutine.
type Progress func(done, total int64, file string)

// importMu serializes imports in this process. Another process cannot
// import into the same data directory: it would need the store, which
// bbolt locks.
var importMu sync.Mutex

// Import verifies the release tree src against keys and copies it into
// dataDir/releases/<release>/ (read-only) with its chunk index in the
// store. See ImportContext.
func Import(db *store.DB, dataDir, src string, keys *Keyring, progress Progress) (*Manifest, error) {
	return ImportContext(context.Background(), db, dataDir, src, keys, progress, "")
}

// ImportContext is Import with cancellation and the actor recorded in the
// audit event. The manifest signature is checked first; then each file is
// hashed as it is copied, so the bytes verified are the bytes kept, and
// chunked for the index. The store record, the clearing of the release's
// corrupt marks and the audit event "release.imported" are one
// transaction. A release that was already imported is replaced. On any
// failure nothing is left behind: no directory, no record; the error names
// the first bad file and why.
func ImportContext(ctx context.Context, db *store.DB, dataDir, src string, keys *Keyring, progress Progress, actor string) (*Manifest, error) {
	importMu.Lock()
	defer importMu.Unlock()

	srcRoot, err := os.OpenRoot(src)
	if err != nil {
		return nil, fmt.Errorf("release source: %w", err)
	}
	defer srcRoot.Close()
	mb, sb, err := readPayload(srcRoot)
	if err != nil {
		return nil, err
	}
	m, err := keys.VerifyManifest(mb, sb)
	if err != nil {
		return nil, err
	}
	present, err := walkTree(srcRoot)
	if err != nil {
		return nil, withRelease(err, m.Release)
	}
	listed := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	for _, p := range present {
		if !listed[p] {
			return nil, badFile(p, m.Release, "not listed in the manifest")
		}
	}

	releasesDir := filepath.Join(dataDir, "releases")
	if err := os.MkdirAll(releasesDir, 0o755); err != nil {
		return nil, err
	}
	if err := removeStale(db, releasesDir); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(releasesDir, ".import-"+m.Release+"-")
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			removeTree(tmp)
		}
	}()

	index, err := copyTree(ctx, srcRoot, tmp, m, mb, sb, progress)
	if err != nil {
		return nil, err
	}
	if err := sealTree(tmp); err != nil {
		return nil, err
	}

	rec := Imported{
		Release:        m.Release,
		ManifestSHA256: hexSum(sha256Sum(mb)),
		ImportID:       randomID(),
		ImportedAt:     time.Now().UTC(),
		CreatedAt:      m.CreatedAt,
		UpgradesFrom:   m.UpgradesFrom,
		Files:          len(m.Files),
		Bytes:          m.TotalSize(),
	}
	for _, fi := range index {
		fi.ImportID = rec.ImportID
	}

	// Swap the tree in before committing: a reader that sees the new
	// record then always finds the new files. Should the commit fail, the
	// swap is undone.
	final := filepath.Join(releasesDir, m.Release)
	aside := ""
	if _, err := os.Lstat(final); err == nil {
		aside = filepath.Join(releasesDir, ".old-"+m.Release+"-"+rec.ImportID)
		if err := os.Rename(final, aside); err != nil {
			return nil, fmt.Errorf("move the previous import of %s aside: %w", m.Release, err)
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
		return nil, fmt.Errorf("install release %s: %w", m.Release, err)
	}
	syncDir(releasesDir)

	err = db.Update(func(tx *store.Tx) error {
		var prev Imported
		replaced, err := tx.GetJSON(bucketReleases, m.Release, &prev)
		if err != nil {
			replaced = true // an unreadable record is replaced all the same
		}
		if err := tx.PutJSON(bucketReleases, m.Release, &rec); err != nil {
			return err
		}
		if err := deletePrefix(tx, bucketFiles, m.Release); err != nil {
			return err
		}
		for p, fi := range index {
			if err := tx.PutJSON(bucketFiles, fileKey(m.Release, p), fi); err != nil {
				return err
			}
		}
		if err := deletePrefix(tx, bucketCorrupt, m.Release); err != nil {
			return err
		}
		return tx.Audit("release.imported", actor, m.Release, map[string]string{
			"manifestSha256": rec.ManifestSHA256,
			"importId":       rec.ImportID,
			"files":          strconv.Itoa(rec.Files),
			"bytes":          strconv.FormatInt(rec.Bytes, 10),
			"replaced":       strconv.FormatBool(replaced),
		})
	})
	if err != nil {
		undo()
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
func copyTree(ctx context.Context, src *os.Root, dir string, m *Manifest, mb, sb []byte, progress Progress) (map[string]*fileIndex, error) {
	dst, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
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
				return nil, fmt.Errorf("release %s: %s: %w", m.Release, f.Path, err)
			}
			return nil, badFile(f.Path, m.Release, err.Error())
		}
		index[f.Path] = fi
	}
	for _, p := range []struct {
		path string
		b    []byte
	}{{ManifestPath, mb}, {SignaturePath, sb}} {
		fi, err := writeBytes(dst, p.path, p.b)
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", p.path, err)
		}
		index[p.path] = fi
		done += int64(len(p.b))
	}
	if progress != nil {
		progress(done, total, "")
	}
	return index, nil
}

// ioError marks a failure of the destination (disk full, I/O error): not
// the release's fault, so not reported as a bad file.
type ioError struct{ err error }

// IsIOError reports whether err is the founder's own disk failing (full,
// read-only, gone) rather than something wrong with the release.
func IsIOError(err error) bool {
	var e *ioError
	return errors.As(err, &e)
}

func (e *ioError) Error() string { return e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

func isIOError(err error) bool {
	var e *ioError
	return errors.As(err, &e)
}

// copyFile copies one listed file chunk by chunk: each chunk is hashed for
// the index (on another core) while the whole-file hash and the write
// proceed, and the file is accepted only when size and hash match.
func copyFile(ctx context.Context, src, dst *os.Root, f File, advance func(int64)) (*fileIndex, error) {
	in, st, err := openRegular(src, f.Path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if st.Size() != f.Size {
		return nil, fmt.Errorf("size %d bytes, manifest says %d", st.Size(), f.Size)
	}
	if d := path.Dir(f.Path); d != "." {
		if err := dst.MkdirAll(d, 0o755); err != nil {
			return nil, &ioError{err}
		}
	}
	out, err := dst.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, &ioError{err}
	}
	defer out.Close()

	fi := &fileIndex{Size: f.Size, SHA256: f.SHA256}
	fi.Chunks = make([]byte, 0, fi.chunkCount()*32)
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
			return nil, fmt.Errorf("read failed: %v", unwrapPath(err))
		}
		wg.Go(func() { chunkSum = sha256.Sum256(b) })
		whole.Write(b)
		_, werr := out.Write(b)
		wg.Wait()
		if werr != nil {
			return nil, &ioError{werr}
		}
		fi.Chunks = append(fi.Chunks, chunkSum[:]...)
		off += int64(len(b))
		advance(int64(len(b)))
	}
	if n, _ := in.Read((*buf)[:1]); n > 0 {
		return nil, fmt.Errorf("longer than its %d bytes (changed while importing?)", f.Size)
	}
	if sum := hexSum(whole.Sum(nil)); sum != f.SHA256 {
		return nil, fmt.Errorf("sha256 %s, manifest says %s", sum, f.SHA256)
	}
	if err := out.Sync(); err != nil {
		return nil, &ioError{err}
	}
	if err := out.Close(); err != nil {
		return nil, &ioError{err}
	}
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
	fi := &fileIndex{Size: int64(len(b)), SHA256: hexSum(sha256Sum(b))}
	for off := 0; off < len(b); off += ChunkSize {
		s := sha256.Sum256(b[off:min(off+ChunkSize, len(b))])
		fi.Chunks = append(fi.Chunks, s[:]...)
	}
	return fi, out.Close()
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// sealTree makes the imported tree read-only (files 0444, directories
// 0555, deepest first) and syncs every directory so the tree is durable
// before the store says it exists.
func sealTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return os.Chmod(p, 0o444)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		syncDir(dirs[i])
		if err := os.Chmod(dirs[i], 0o555); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes a read-only tree: directories are made writable
// first, since removing an entry needs write permission on its parent.
func removeTree(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// removeStale settles what an import killed half-way left behind, by what
// the store says committed: an import moves the previous tree aside as
// .old-<release>-<new import id>, swaps the new tree in, then commits.
//   - the record names the new import id: the commit happened, the aside
//     is garbage;
//   - otherwise the tree in place is the uncommitted one: it goes, and the
//     aside (the tree the record describes) comes back;
//   - a release directory with no record at all was never committed.
//
// It runs under importMu (or before serving), and the store lock keeps
// other processes out, so no other import owns these directories.
func removeStale(db *store.DB, releasesDir string) error {
	entries, err := os.ReadDir(releasesDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	recorded := func(release string) (*Imported, error) {
		r, found, err := Get(db, release)
		if err != nil || !found {
			return nil, err
		}
		return r, nil
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, ".old-")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '-')
		if i <= 0 || semver.Valid(rest[:i]) != nil {
			removeTree(filepath.Join(releasesDir, name))
			continue
		}
		release, newID := rest[:i], rest[i+1:]
		rec, err := recorded(release)
		if err != nil {
			return err
		}
		if rec != nil && rec.ImportID == newID {
			removeTree(filepath.Join(releasesDir, name))
			continue
		}
		final := filepath.Join(releasesDir, release)
		removeTree(final)
		if err := os.Rename(filepath.Join(releasesDir, name), final); err != nil {
			return fmt.Errorf("restore the committed tree of %s: %w", release, err)
		}
	}
	entries, _ = os.ReadDir(releasesDir)
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".import-") || strings.HasPrefix(name, ".old-"):
			removeTree(filepath.Join(releasesDir, name))
		case semver.Valid(name) == nil:
			rec, err := recorded(name)
			if err != nil {
				return err
			}
			if rec == nil {
				removeTree(filepath.Join(releasesDir, name))
			}
		}
	}
	syncDir(releasesDir)
	return nil
}

// Recover settles an import interrupted by a crash; the founder runs it
// before serving, so a listed release is always served from its own tree.
func Recover(db *store.DB, dataDir string) error {
	importMu.Lock()
	defer importMu.Unlock()
	return removeStale(db, filepath.Join(dataDir, "releases"))
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
