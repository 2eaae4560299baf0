package release

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	sha256 "github.com/minio/sha256-simd"

	"stratum/apierr"
	"stratum/semver"
	"stratum/store"
)

// ServeFile answers GET or HEAD for one file of an imported release. The
// caller has already authorized the joiner. An error is returned only
// before the first byte is written (the HTTP layer then writes the error
// envelope; for RANGE_NOT_SATISFIABLE the Content-Range header is already
// set); once the body has started, a failure cuts the response short and
// nil is returned.
//
// path must be valid and listed in the release's index (the manifest's
// files and the two payload files), else NOT_FOUND, decided from the store
// without touching the disk. Every 1 MiB chunk the response touches is
// read whole and its SHA-256 checked against the index before any of its
// bytes is written; a mismatch marks the file corrupt until re-import.
func (m *Mirror) ServeFile(w http.ResponseWriter, r *http.Request, release, path string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return apierr.New(apierr.MethodNotAllowed, "release files are read with GET or HEAD")
	}
	if semver.Valid(release) != nil || ValidPath(path) != nil {
		return notFound(release, path)
	}
	select {
	case <-m.done:
		return apierr.New(apierr.Unavailable, "the founder is shutting down")
	default:
	}

	var fi *fileIndex
	var found, marked bool
	err := m.db.View(func(tx *store.Tx) error {
		var err error
		if tx.GetRaw(bucketReleases, release) == nil {
			return nil
		}
		raw := tx.GetRaw(bucketFiles, fileKey(release, path))
		if raw == nil {
			return nil
		}
		found = true
		if fi, err = m.indexes.decode(fileKey(release, path), raw); err != nil {
			return err
		}
		var mark corruptMark
		marked, err = tx.GetJSON(bucketCorrupt, fileKey(release, path), &mark)
		return err
	})
	switch {
	case err != nil:
		return err
	case !found:
		return notFound(release, path)
	case marked:
		return corruptError(release, path)
	case fi.Size < 0 || int64(len(fi.Chunks)) != fi.chunkCount()*32:
		return fmt.Errorf("release %s: chunk index of %s is damaged", release, path)
	}

	etag := `"sha256:` + fi.SHA256 + `"`
	h := w.Header()
	if inm := strings.Join(r.Header.Values("If-None-Match"), ","); inm != "" && etagListMatches(inm, etag) {
		h.Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	part := ByteRange{Start: 0, Length: fi.Size}
	status := http.StatusOK
	if rh := r.Header.Get("Range"); rh != "" && ifRangeAllows(r.Header.Get("If-Range"), etag) {
		ranges, err := ParseRange(rh, fi.Size)
		if err != nil {
			h.Set("Accept-Ranges", "bytes")
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(fi.Size, 10))
			return apierr.New(apierr.RangeNotSatisfiable, "%s: %v (the file has %d bytes)", path, err, fi.Size)
		}
		if len(ranges) == 1 {
			part, status = ranges[0], http.StatusPartialContent
		}
		// Several ranges: the whole file, as a 200.
	}
	writeHeader := func() {
		h.Set("ETag", etag)
		h.Set("Accept-Ranges", "bytes")
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(part.Length, 10))
		if status == http.StatusPartialContent {
			h.Set("Content-Range", part.ContentRange(fi.Size))
		}
		w.WriteHeader(status)
		m.responses.Add(1)
	}
	if r.Method == http.MethodHead || part.Length == 0 {
		// Headers only: nothing is read, so no slot is needed.
		writeHeader()
		return nil
	}

	if !m.tryAcquire() {
		return m.busyError()
	}
	defer m.releaseSlot()
	return m.stream(w, r, release, path, fi, part, writeHeader)
}

// stream sends part of the file, verifying each chunk before writing any
// of its bytes; writeHeader is called once the first chunk is verified,
// so a file found corrupt at once still gets a clean error response.
func (m *Mirror) stream(w http.ResponseWriter, r *http.Request, release, path string, fi *fileIndex, part ByteRange, writeHeader func()) error {
	f, err := m.open(release, path, fi)
	if err != nil {
		return m.broken(release, path, fi, err)
	}
	defer f.Close()

	buf := getChunk()
	defer putChunk(buf)
	rc := http.NewResponseController(w)
	timeout := m.ChunkWriteTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	started := false
	end := part.Start + part.Length
	for c := part.Start / ChunkSize; c*ChunkSize < end; c++ {
		select {
		case <-m.done:
			return m.cut(started, apierr.New(apierr.Unavailable, "the founder is shutting down"))
		case <-r.Context().Done():
			return nil // the client is gone
		default:
		}
		off := c * ChunkSize
		b := (*buf)[:min(ChunkSize, fi.Size-off)]
		if _, err := f.ReadAt(b, off); err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("chunk %d: file shorter than its %d bytes", c, fi.Size)
			} else {
				err = fmt.Errorf("chunk %d: read failed: %w", c, err)
			}
			return m.cut(started, m.broken(release, path, fi, err))
		}
		if sum := sha256.Sum256(b); !bytes.Equal(sum[:], fi.chunk(c)) {
			err := fmt.Errorf("chunk %d (bytes %d-%d): sha256 %x, index says %x", c, off, off+int64(len(b))-1, sum, fi.chunk(c))
			return m.cut(started, m.broken(release, path, fi, err))
		}
		if !started {
			writeHeader()
			started = true
		}
		lo, hi := max(part.Start, off)-off, min(end, off+int64(len(b)))-off
		_ = rc.SetWriteDeadline(time.Now().Add(timeout)) // not every writer supports it
		n, err := w.Write(b[lo:hi])
		m.bytesSent.Add(uint64(n))
		if err != nil {
			m.log.Debug("release download cut by the client", "release", release, "path", path, "err", err)
			return nil
		}
	}
	_ = rc.SetWriteDeadline(time.Time{})
	return nil
}

// cut returns err when nothing was written yet; once the body has started
// the response can only be cut short, which the client sees as a body
// shorter than its Content-Length.
func (m *Mirror) cut(started bool, err error) error {
	if started {
		return nil
	}
	return err
}

// open opens the release file without following links (os.Root keeps
// every step inside the release directory) and checks it is the regular
// file of the indexed size.
func (m *Mirror) open(release, path string, fi *fileIndex) (*os.File, error) {
	root, err := os.OpenRoot(filepath.Join(m.dir, release))
	if err != nil {
		return nil, fmt.Errorf("release directory: %w", err)
	}
	defer root.Close()
	f, st, err := openRegular(root, path)
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
func (m *Mirror) broken(release, path string, fi *fileIndex, cause error) error {
	if errors.Is(cause, syscall.EMFILE) || errors.Is(cause, syscall.ENFILE) || errors.Is(cause, syscall.ENOMEM) || errors.Is(cause, syscall.EINTR) {
		m.log.Error("release file cannot be opened", "release", release, "path", path, "err", cause)
		return fmt.Errorf("release %s: %s: %w", release, path, cause)
	}
	reason := cause.Error()
	key := fileKey(release, path)
	marked := false
	err := m.db.Update(func(tx *store.Tx) error {
		var now fileIndex
		if found, err := tx.GetJSON(bucketFiles, key, &now); err != nil || !found || now.ImportID != fi.ImportID {
			return err
		}
		if tx.GetRaw(bucketCorrupt, key) != nil {
			return nil
		}
		marked = true
		if err := tx.PutJSON(bucketCorrupt, key, corruptMark{ImportID: fi.ImportID, At: time.Now().UTC(), Reason: reason}); err != nil {
			return err
		}
		return tx.Audit("release.corrupt", "", release, map[string]string{"path": path, "reason": reason, "importId": fi.ImportID})
	})
	switch {
	case err != nil:
		m.log.Error("release file failed verification; marking it corrupt failed", "release", release, "path", path, "reason", reason, "err", err)
	case marked:
		m.corrupt.Add(1)
		m.log.Error("release file failed verification; marked corrupt until re-import", "release", release, "path", path, "reason", reason)
	default:
		m.log.Warn("release file changed while served (re-imported?)", "release", release, "path", path, "reason", reason)
	}
	return corruptError(release, path)
}

// ifRangeAllows applies If-Range: the range is honored only when the
// validator is our strong ETag. A date never matches (no Last-Modified is
// sent), nor does a weak tag: the whole file is sent instead.
func ifRangeAllows(ifRange, etag string) bool {
	ifRange = strings.Trim(ifRange, " \t")
	return ifRange == "" || ifRange == etag
}

// etagListMatches applies If-None-Match (weak comparison): "*" or any
// listed entity tag equal to etag. Parsing stops at the first malformed
// element, which then matches nothing.
func etagListMatches(list, etag string) bool {
	for {
		list = strings.TrimLeft(list, " \t,")
		if list == "" {
			return false
		}
		if list[0] == '*' {
			return true
		}
		list = strings.TrimPrefix(list, "W/")
		if list == "" || list[0] != '"' {
			return false
		}
		end := strings.IndexByte(list[1:], '"')
		if end < 0 {
			return false
		}
		if list[:end+2] == etag {
			return true
		}
		list = list[end+2:]
	}
}
