package repo

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"stratum/apierr"
	"stratum/release"
	"stratum/store"
)

// UploadLimits bound a release tree uploaded as a tar stream.
type UploadLimits struct {
	MaxBytes int64 // the whole stream, headers and padding included
	MaxFiles int   // entries, directories included
}

// DefaultUploadLimits hold any release the mirror serves today (an OS
// image is a few GiB) with room to spare.
var DefaultUploadLimits = UploadLimits{MaxBytes: 64 << 30, MaxFiles: 100_000}

// Sizes of the payload files read into memory before the rest.
const (
	maxUploadManifest  = 64 << 20
	maxUploadSignature = 1 << 20
	maxEntryName       = 1024
)

// uploadMu lets one upload run at a time in this process: its staging
// directory is cleared when the next begins (a crash leaves one behind).
var uploadMu sync.Mutex

// importTar imports a signed release tree sent as a tar stream (its
// paths relative to the tree: payload/manifest.json first, with
// payload/manifest.sig, then the files). The manifest's signature is
// verified before any other byte is received, and every later entry must
// be a file the manifest lists, at its size: nothing unsigned is written.
// The received tree is staged under dataDir/uploads and then imported by
// importTree, which hashes every file again as it keeps it; the staged copy
// is removed either way.
func importTar(ctx context.Context, db *store.DB, dataDir string, r io.Reader, keys *release.Keyring, limits UploadLimits, opts ImportOptions) (*release.Manifest, error) {
	if !uploadMu.TryLock() {
		e := apierr.New(apierr.ReleaseBusy, "another release upload is running on this founder; retry when it ends")
		e.RetryAfter = 10
		return nil, e
	}
	defer uploadMu.Unlock()
	staging := filepath.Join(dataDir, "uploads")
	removeTree(staging)
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return nil, ioError("create the upload directory", err)
	}
	defer removeTree(staging)
	root, err := os.OpenRoot(staging)
	if err != nil {
		return nil, ioError("open the upload directory", err)
	}
	defer root.Close()
	if err := receiveTree(ctx, r, root, keys, limits); err != nil {
		return nil, err
	}
	return importTree(ctx, db, dataDir, staging, keys, opts)
}

// receiveTree writes the stream's files under root, checking the
// signature first and each file against the manifest.
func receiveTree(ctx context.Context, r io.Reader, root *os.Root, keys *release.Keyring, limits UploadLimits) error {
	var mb, sb []byte
	var m *release.Manifest
	seen := map[string]bool{}
	return ReadTarEntries(r, limits, func(name string, h *tar.Header, body io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeDir {
			return mkdirAll(root, name)
		}
		if m == nil {
			switch name {
			case release.ManifestPath:
				b, err := readEntry(body, h.Size, maxUploadManifest, name)
				mb = b
				if err != nil {
					return err
				}
			case release.SignaturePath:
				b, err := readEntry(body, h.Size, maxUploadSignature, name)
				sb = b
				if err != nil {
					return err
				}
			default:
				return uploadRefused(name, "comes before "+release.ManifestPath+" and "+release.SignaturePath+", which open the stream")
			}
			if mb == nil || sb == nil {
				return nil
			}
			var err error
			if m, err = keys.VerifyManifest(mb, sb); err != nil {
				return err
			}
			for _, p := range []struct {
				name string
				b    []byte
			}{{release.ManifestPath, mb}, {release.SignaturePath, sb}} {
				if err := writeEntry(root, p.name, bytes.NewReader(p.b)); err != nil {
					return err
				}
			}
			return nil
		}
		f, listed := m.Lookup(name)
		switch {
		case !listed:
			return uploadRefused(name, "not listed in the signed manifest")
		case seen[name]:
			return uploadRefused(name, "sent twice")
		case f.Size != h.Size:
			return uploadRefused(name, fmt.Sprintf("%d bytes, the manifest lists %d", h.Size, f.Size))
		}
		seen[name] = true
		return writeEntry(root, name, body)
	})
}

// ReadTarEntries walks a tar stream within limits and calls visit with
// each regular file or directory under its checked name (a clean,
// relative, local path). Links, devices and other types, names that
// leave the tree, duplicates and a stream over its limits are refused
// as INVALID_INPUT or PAYLOAD_TOO_LARGE before visit sees them.
func ReadTarEntries(r io.Reader, limits UploadLimits, visit func(name string, h *tar.Header, body io.Reader) error) error {
	counted := &countingReader{r: r, left: limits.MaxBytes}
	tr := tar.NewReader(counted)
	names := map[string]bool{}
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return apierr.New(apierr.InvalidInput, "the upload holds no file: send the release tree as a tar stream")
			}
			return nil
		}
		if counted.over {
			return tooLarge(limits)
		}
		if err != nil {
			return apierr.New(apierr.InvalidInput, "the upload is not a readable tar stream: %v", err)
		}
		if n >= limits.MaxFiles {
			return apierr.New(apierr.PayloadTooLarge, "the upload holds more than %d entries", limits.MaxFiles)
		}
		name, err := EntryName(h)
		if err != nil {
			return err
		}
		if name == "" {
			continue // the tree's own root, "./"
		}
		if names[name] {
			return uploadRefused(name, "sent twice")
		}
		names[name] = true
		if err := visit(name, h, tr); err != nil {
			if counted.over {
				return tooLarge(limits)
			}
			return err
		}
	}
}

// EntryName checks one tar header and returns the local path it names:
// only regular files and directories, a relative, clean path inside the
// tree (no "..", no absolute path, no NUL, valid UTF-8, bounded length).
// The tree's root ("." or "./") is "".
func EntryName(h *tar.Header) (string, error) {
	raw := h.Name
	if len(raw) > maxEntryName || !utf8.ValidString(raw) || strings.ContainsRune(raw, 0) || strings.Contains(raw, "\\") {
		return "", uploadRefused(printable(raw), "not a valid path")
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir:
	default:
		return "", uploadRefused(printable(raw), "not a regular file or directory (links and devices are refused)")
	}
	if h.Size < 0 || (h.Typeflag == tar.TypeDir && h.Size != 0) {
		return "", uploadRefused(printable(raw), "bad size")
	}
	name := strings.TrimSuffix(strings.TrimPrefix(raw, "./"), "/")
	if name == "" || name == "." {
		if h.Typeflag == tar.TypeDir {
			return "", nil
		}
		return "", uploadRefused(printable(raw), "not a valid path")
	}
	if path.Clean(name) != name || !filepath.IsLocal(name) || strings.HasPrefix(name, "/") {
		return "", uploadRefused(printable(raw), "leaves the release tree or is not clean")
	}
	return name, nil
}

func printable(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.ReplaceAll(s, "\x00", "?")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func uploadRefused(name, reason string) error {
	return apierr.WithFields(apierr.InvalidInput, "release not imported: "+name+": "+reason, []apierr.FieldError{{Field: name, Message: reason}})
}

func tooLarge(l UploadLimits) error {
	return apierr.New(apierr.PayloadTooLarge, "the upload is over its limit of %d bytes", l.MaxBytes)
}

// readEntry reads a small payload file whole.
func readEntry(body io.Reader, size, limit int64, name string) ([]byte, error) {
	if size > limit {
		return nil, uploadRefused(name, fmt.Sprintf("over %d bytes", limit))
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, apierr.New(apierr.InvalidInput, "the upload ended inside %s: %v", name, err)
	}
	return b, nil
}

func mkdirAll(root *os.Root, name string) error {
	if err := root.MkdirAll(name, 0o755); err != nil {
		return uploadRefused(name, "cannot be created: "+errors.Unwrap(err).Error())
	}
	return nil
}

// writeEntry writes one file under root (never over another).
func writeEntry(root *os.Root, name string, body io.Reader) error {
	if dir := path.Dir(name); dir != "." {
		if err := mkdirAll(root, dir); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return uploadRefused(name, "cannot be created (a directory of that name, or sent twice)")
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return apierr.New(apierr.InvalidInput, "the upload ended inside %s: %v", name, err)
	}
	if err := f.Close(); err != nil {
		return ioError("write an uploaded file", err)
	}
	return nil
}

// countingReader stops a stream at its byte limit.
type countingReader struct {
	r    io.Reader
	left int64
	over bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// At the limit: only the end of the stream may follow.
		var b [1]byte
		if n, err := c.r.Read(b[:]); n == 0 {
			return 0, err
		}
		c.over = true
		return 0, errors.New("over the upload limit")
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
