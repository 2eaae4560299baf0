package release

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	sha256 "github.com/minio/sha256-simd"
)

// Size limits of the two payload files: far above real ones, low enough
// that a hostile tree cannot make a verifier read gigabytes into memory.
const (
	maxManifestSize  = 64 << 20
	maxSignatureSize = 1 << 20
)

// OpenRegular opens rel inside root without following a symbolic link at
// any step out of the tree (os.Root) nor at the last element (O_NOFOLLOW),
// and refuses anything but a regular file. A release tree holds regular
// files only; a link in it is either a mistake or an attack. O_NONBLOCK
// keeps a FIFO planted in a tree from blocking the open until a writer
// comes (it changes nothing for a regular file).
func OpenRegular(root *os.Root, rel string) (*os.File, os.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, describeOpenError(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	return f, st, nil
}

func describeOpenError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("missing")
	case errors.Is(err, syscall.ELOOP):
		return errors.New("is a symbolic link (refused: a release holds regular files only)")
	case errors.Is(err, syscall.ENOTDIR):
		return errors.New("missing (a parent is not a directory)")
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// os.Root reports a link leading out of the tree this way.
		return fmt.Errorf("cannot be opened inside the tree: %v", pe.Err)
	}
	return err
}

// readSmall reads a payload file of at most limit bytes.
func readSmall(root *os.Root, rel string, limit int64) ([]byte, error) {
	f, st, err := OpenRegular(root, rel)
	if err != nil {
		return nil, badFile(rel, "", err.Error())
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, badFile(rel, "", fmt.Sprintf("%d bytes, more than the %d allowed", st.Size(), limit))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if int64(len(b)) > limit {
		return nil, badFile(rel, "", fmt.Sprintf("more than the %d bytes allowed", limit))
	}
	return b, nil
}

// ReadPayload returns the exact bytes of manifest.json and manifest.sig.
func ReadPayload(root *os.Root) (manifest, sig []byte, err error) {
	if manifest, err = readSmall(root, ManifestPath, maxManifestSize); err != nil {
		return nil, nil, err
	}
	if sig, err = readSmall(root, SignaturePath, maxSignatureSize); err != nil {
		return nil, nil, err
	}
	return manifest, sig, nil
}

// walkTree lists the regular files of the tree in lexical order, leaving
// out the two payload files. A symbolic link or any other non-regular
// file is an error naming it: the walk never follows one.
func walkTree(root *os.Root) ([]string, error) {
	var files []string
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return badFile(p, "", fmt.Sprintf("cannot be read: %v", UnwrapPath(err)))
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return badFile(p, "", "is a symbolic link (refused: a release holds regular files only)")
		case !d.Type().IsRegular():
			return badFile(p, "", fmt.Sprintf("not a regular file (%s)", d.Type()))
		case p == ManifestPath || p == SignaturePath:
			return nil
		}
		files = append(files, p)
		return nil
	})
	return files, err
}

// UnwrapPath drops the path an fs.PathError adds: error messages name
// files by their path in the release, not on the founder's disk.
func UnwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// hashBufferSize is the read size of hashFile: large enough that the
// hash, not the system calls, sets the pace.
const hashBufferSize = 1 << 20

// hashFile hashes rel, refusing it early when its size is not want.
func hashFile(root *os.Root, rel string, want int64) (string, error) {
	f, st, err := OpenRegular(root, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if want >= 0 && st.Size() != want {
		return "", fmt.Errorf("size %d bytes, manifest says %d", st.Size(), want)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.LimitReader(f, st.Size()+1), make([]byte, hashBufferSize))
	if err != nil {
		return "", fmt.Errorf("read failed: %v", UnwrapPath(err))
	}
	if want >= 0 && n != want {
		return "", fmt.Errorf("size changed while reading (%d bytes, manifest says %d)", n, want)
	}
	return hexSum(h.Sum(nil)), nil
}

// forEachParallel runs fn for indices 0..n-1 on a few workers and returns
// the error of the lowest index that failed. Workers take indices in
// order and stop taking new ones after a failure, so every index below a
// failing one has been run: the error returned is the first in list order.
func forEachParallel(n int, fn func(i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), 8, n)
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs[i] = err
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// VerifyTree checks dir against m: every listed file exists as a regular
// file with the exact size and SHA-256, and every file of the tree but the
// two payload files is listed. The error names the first bad file and why.
func VerifyTree(dir string, m *Manifest) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("release tree: %w", err)
	}
	defer root.Close()
	return verifyTree(root, m)
}

func verifyTree(root *os.Root, m *Manifest) error {
	if err := CheckUnlisted(root, m); err != nil {
		return err
	}
	return forEachParallel(len(m.Files), func(i int) error {
		f := m.Files[i]
		sum, err := hashFile(root, f.Path, f.Size)
		if err != nil {
			return badFile(f.Path, m.Release, err.Error())
		}
		if sum != f.SHA256 {
			return badFile(f.Path, m.Release, fmt.Sprintf("sha256 %s, manifest says %s", sum, f.SHA256))
		}
		return nil
	})
}

// Verify checks the release tree at dir: the manifest signature against
// keys, then every file. It returns the verified manifest.
func Verify(dir string, keys *Keyring) (*Manifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("release tree: %w", err)
	}
	defer root.Close()
	mb, sb, err := ReadPayload(root)
	if err != nil {
		return nil, err
	}
	m, err := keys.VerifyManifest(mb, sb)
	if err != nil {
		return nil, err
	}
	if err := verifyTree(root, m); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckUnlisted walks the tree without following any link and fails on
// the first file that is not a regular file or that m does not list:
// every file of a release tree but the two payload files is listed.
func CheckUnlisted(root *os.Root, m *Manifest) error {
	present, err := walkTree(root)
	if err != nil {
		return withRelease(err, m.Release)
	}
	listed := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	for _, p := range present {
		if !listed[p] {
			return badFile(p, m.Release, "not listed in the manifest")
		}
	}
	return nil
}

// withRelease adds the release to a badFile error made without it.
func withRelease(err error, release string) error {
	var fe *FileError
	if errors.As(err, &fe) && release != "" {
		return badFile(fe.Path, release, fe.Reason)
	}
	return err
}
