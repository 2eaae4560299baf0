package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"stratum/apierr"
	"stratum/internal/gatherconn"
	"stratum/release/repo"
)

// ReleaseFiles is the founder's release repository as the join listener
// reads it (repo.Service).
type ReleaseFiles interface {
	// Stat names the file and its size and ETag; no disk access, no slot.
	Stat(release, path string) (*repo.FileInfo, error)
	// Open takes one of holder's read slots and opens the file.
	Open(holder string, fi *repo.FileInfo) (*repo.Reader, error)
}

// ServeReleaseFile answers GET or HEAD for one file of an imported
// release, for holder (the registration reading it). The caller has
// authorized the joiner. An error is returned only before the first byte
// is written (the caller then writes the envelope; for
// RANGE_NOT_SATISFIABLE the Content-Range header is already set); once
// the body has started, a failure cuts the response short and nil is
// returned: the client sees a body shorter than its Content-Length,
// never a wrong byte, since the reader hands out verified chunks only.
func ServeReleaseFile(w http.ResponseWriter, r *http.Request, files ReleaseFiles, holder, release, path string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return apierr.New(apierr.MethodNotAllowed, "release files are read with GET or HEAD")
	}
	fi, err := files.Stat(release, path)
	if err != nil {
		return err
	}
	etag := fi.ETag()
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
		// The keys in canonical form, assigned directly, their values
		// slices of one array: one allocation instead of five, and no
		// canonicalization (a share of a small range's own cost).
		v := new([5]string)
		v[0], v[1], v[2], v[3] = etag, "bytes", "application/octet-stream", strconv.FormatInt(part.Length, 10)
		h["Etag"], h["Accept-Ranges"], h["Content-Type"], h["Content-Length"] = v[0:1:1], v[1:2:2], v[2:3:3], v[3:4:4]
		if status == http.StatusPartialContent {
			v[4] = part.ContentRange(fi.Size)
			h["Content-Range"] = v[4:5:5]
		}
		w.WriteHeader(status)
	}
	if r.Method == http.MethodHead || part.Length == 0 {
		// Headers only: nothing is read, so no slot is needed.
		writeHeader()
		return nil
	}
	rd, err := files.Open(holder, fi)
	if err != nil {
		return err
	}
	defer rd.Close()
	return streamPart(w, r, rd, part, writeHeader)
}

// streamPart sends part of the file as the reader verifies it; writeHeader
// is called once the first unit is verified, so a file found corrupt at
// once still gets a clean error response.
func streamPart(w http.ResponseWriter, r *http.Request, rd *repo.Reader, part ByteRange, writeHeader func()) error {
	rc := http.NewResponseController(w)
	// The reader's own limits replace the server's write deadline: a file
	// takes as long as it needs while it keeps moving, and a write blocked
	// on a reader that stopped reading ends as soon as the read is cut.
	_ = rc.SetWriteDeadline(rd.Deadline()) // not every writer supports it
	rd.OnCut(func() { _ = rc.SetWriteDeadline(time.Now()) })
	defer rd.OnCut(nil)
	started := false
	for b, err := range rd.Verified(part.Start, part.Start+part.Length) {
		if err != nil {
			if started {
				return nil // cut short: the client sees a short body
			}
			return err
		}
		if r.Context().Err() != nil {
			return nil // the client is gone
		}
		if !started {
			writeHeader()
			started = true
		}
		// The records of one piece (up to a step, 256 KiB) reach
		// the socket in a few system calls, all before Write returns.
		n, err := gatherconn.Write(w, r, b)
		rd.Sent(n)
		if err != nil {
			return nil // the client stopped reading or went away
		}
	}
	_ = rc.SetWriteDeadline(time.Time{})
	return nil
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
