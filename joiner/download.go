package joiner

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"stratum/apiclient"

	sha256 "github.com/minio/sha256-simd"

	"stratum/release"
)

// fetchFile brings one manifest file into the tree (SPEC 7 step 4).
//
// A file already in the tree was verified when it was moved there; it is
// hashed again (no download) in case the disk or an older manifest of the
// same release number disagrees. Otherwise the file is downloaded into
// <downloads>/<path>.partial, resuming a partial file left by a cut
// connection or an earlier run with "Range: bytes=N-" and "If-Range" (the
// validator of the first answer is kept beside the partial file), hashed
// as it is written, and renamed into the tree only if its SHA-256 matches.
// A mismatch deletes the partial file and fails, naming the file.
func (j *joiner) fetchFile(ctx context.Context, src *source, rel string, f release.File, tree, dl string, prog *progress) error {
	final := filepath.Join(tree, filepath.FromSlash(f.Path))
	ok, removed, err := alreadyVerified(final, f)
	if err != nil {
		return err
	}
	if removed {
		j.log.printf("%s in %s does not match the manifest: fetching it again", f.Path, tree)
	}
	if ok {
		prog.add(f.Size)
		prog.fileDone(f, "already verified")
		return nil
	}
	partial := filepath.Join(dl, filepath.FromSlash(f.Path)) + ".partial"
	validatorPath := partial + ".validator"
	if err := os.MkdirAll(filepath.Dir(partial), 0o700); err != nil {
		return err
	}
	file, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer file.Close()

	h := sha256.New()
	off, err := hashPrefix(file, h, f.Size)
	if err != nil {
		return fmt.Errorf("read %s: %w", partial, err)
	}
	if off > 0 {
		j.log.printf("resuming %s at %s of %s", f.Path, HumanBytes(off), HumanBytes(f.Size))
	}
	prog.add(off)
	d := &download{j: j, src: src, f: f, file: file, h: h, off: off, prog: prog, validatorPath: validatorPath}
	if err := j.retryRelease(ctx, "downloading "+f.Path, d.attempt); err != nil {
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if sum != f.SHA256 {
		file.Close()
		_ = removeAll(partial, validatorPath)
		return fmt.Errorf("release %s: %s fails verification: its sha256 is %s, the signed manifest says %s; the download was deleted (run again to fetch it afresh)", rel, f.Path, sum, f.SHA256)
	}
	if err := file.Sync(); err != nil {
		return err
	}
	if err := file.Chmod(0o644); err != nil {
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	if err := os.Rename(partial, final); err != nil {
		return err
	}
	_ = removeAll(validatorPath)
	prog.fileDone(f, "downloaded and verified")
	return nil
}

// alreadyVerified reports whether final is a regular file of f's size and
// hash. A mismatching file is removed so it is downloaded again.
func alreadyVerified(final string, f release.File) (ok, removed bool, err error) {
	st, err := os.Lstat(final)
	if err != nil {
		return false, false, nil
	}
	if st.Mode().IsRegular() && st.Size() == f.Size {
		file, err := os.Open(final)
		if err != nil {
			return false, false, err
		}
		h := sha256.New()
		_, err = io.Copy(h, file)
		file.Close()
		if err != nil {
			return false, false, err
		}
		if hex.EncodeToString(h.Sum(nil)) == f.SHA256 {
			return true, false, nil
		}
	}
	return false, true, os.RemoveAll(final)
}

// hashPrefix feeds the partial file's bytes to h and returns its length;
// a partial file longer than the manifest's size cannot be a prefix and is
// emptied.
func hashPrefix(file *os.File, h hash.Hash, size int64) (int64, error) {
	st, err := file.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() > size {
		return 0, file.Truncate(0)
	}
	n, err := io.Copy(h, io.NewSectionReader(file, 0, st.Size()))
	if err != nil {
		return 0, err
	}
	_, err = file.Seek(n, io.SeekStart)
	return n, err
}

// download is one file's transfer state across attempts.
type download struct {
	j             *joiner
	src           *source
	f             release.File
	file          *os.File
	h             hash.Hash
	off           int64
	prog          *progress
	validatorPath string
}

// restart empties the partial file: the server cannot continue it.
func (d *download) restart() error {
	if err := d.file.Truncate(0); err != nil {
		return err
	}
	if _, err := d.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	d.h.Reset()
	d.prog.add(-d.off)
	d.off = 0
	_ = os.Remove(d.validatorPath)
	return nil
}

// attempt is one request for the rest of the file.
func (d *download) attempt(ctx context.Context) error {
	if d.off == d.f.Size {
		return nil
	}
	// A watchdog cuts the attempt when no byte arrives for stallAfter, so
	// a silently dead connection is retried instead of waited on forever.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchdog := time.AfterFunc(d.j.cfg.stallAfter, cancel)
	defer watchdog.Stop()

	req, err := http.NewRequestWithContext(actx, http.MethodGet, d.src.url(d.f.Path), nil)
	if err != nil {
		return err
	}
	if d.off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", d.off))
		if v := readValidator(d.validatorPath); v != "" {
			req.Header.Set("If-Range", v)
		}
	}
	resp, err := d.src.hc.Do(req)
	if err != nil {
		return networkError(ctx, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if d.off > 0 {
			// The file changed under the validator, or the server ignores
			// ranges: start over rather than splice two versions.
			d.j.log.printf("%s: the server sent the whole file instead of the rest; starting it again", d.f.Path)
			if err := d.restart(); err != nil {
				return err
			}
		}
	case http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != d.off || total != d.f.Size {
			d.j.log.printf("%s: the server answered range %q for bytes %d- of %d; starting the file again", d.f.Path, resp.Header.Get("Content-Range"), d.off, d.f.Size)
			if err := d.restart(); err != nil {
				return err
			}
			return &apiclient.TransientError{Err: errors.New("unusable range answer"), After: time.Millisecond}
		}
	case http.StatusRequestedRangeNotSatisfiable:
		if err := d.restart(); err != nil {
			return err
		}
		return &apiclient.TransientError{Err: errors.New("range not satisfiable; starting the file again"), After: time.Millisecond}
	case http.StatusNotFound:
		return fmt.Errorf("%s does not serve %s: %w", d.src.name, d.f.Path, errNotServed)
	default:
		return apiclient.ResponseError(resp)
	}
	if resp.ContentLength >= 0 && resp.ContentLength != d.f.Size-d.off {
		d.j.log.printf("%s: the server announces %d bytes where %d are expected; the hash check will decide", d.f.Path, resp.ContentLength, d.f.Size-d.off)
	}
	if d.off == 0 {
		writeValidator(d.validatorPath, resp.Header)
	}
	n, err := d.copy(resp.Body, watchdog)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if n > 0 {
			return &apiclient.TransientError{Err: fmt.Errorf("connection lost after %s (%v); resuming at %s", HumanBytes(n), err, HumanBytes(d.off)), Progressed: true}
		}
		return &apiclient.TransientError{Err: err}
	}
	if d.off < d.f.Size {
		return &apiclient.TransientError{Err: fmt.Errorf("the server ended the file at %s of %s; resuming", HumanBytes(d.off), HumanBytes(d.f.Size)), Progressed: n > 0}
	}
	return nil
}

// copy appends the body to the partial file and the hash, never past the
// manifest's size, advancing off as bytes land so a cut keeps them.
func (d *download) copy(body io.Reader, watchdog *time.Timer) (int64, error) {
	buf := make([]byte, 256<<10)
	var total int64
	r := io.LimitReader(body, d.f.Size-d.off)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			watchdog.Reset(d.j.cfg.stallAfter)
			if _, err := d.file.Write(buf[:n]); err != nil {
				return total, fmt.Errorf("write %s: %w", d.file.Name(), err)
			}
			d.h.Write(buf[:n])
			d.off += int64(n)
			total += int64(n)
			d.prog.add(int64(n))
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// parseContentRange reads "bytes START-END/TOTAL".
func parseContentRange(v string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	s, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(s, 10, 64)
	total, err2 := strconv.ParseInt(tot, 10, 64)
	return start, total, err1 == nil && err2 == nil
}

// writeValidator keeps what If-Range needs to resume this very version:
// a strong ETag (the founder's "sha256:<hex>"), else Last-Modified. A weak
// ETag cannot be used with If-Range; without a validator a resume sends no
// If-Range, and the hash check is the only guard against splicing.
func writeValidator(path string, h http.Header) {
	v := h.Get("ETag")
	if v == "" || strings.HasPrefix(v, "W/") {
		v = h.Get("Last-Modified")
	}
	if v == "" {
		_ = os.Remove(path)
		return
	}
	_ = os.WriteFile(path, []byte(v), 0o600)
}

func readValidator(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
