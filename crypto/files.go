package crypto

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFileAtomic replaces path with data so that a crash leaves either
// the old file or the new one, never a torn or world-readable secret: a
// temp file in the same (existing) directory at mode,
// fsync, rename, fsync of the directory.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return WriteFileAtomicFunc(path, mode, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	})
}

// WriteFileAtomicFunc is WriteFileAtomic for content that fill streams;
// when fill fails, path is left as it was.
func WriteFileAtomicFunc(path string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	return writeAtomic(f, path, mode, fill)
}

// WriteFileAtomicAs is WriteFileAtomicFunc through a temp file of a known
// name in path's directory (FILE.partial, say), for a writer whose
// progress another process watches; a crash leaves at most that file.
func WriteFileAtomicAs(path, tmpName string, mode os.FileMode, fill func(io.Writer) error) error {
	f, err := os.OpenFile(filepath.Join(filepath.Dir(path), filepath.Base(tmpName)), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	return writeAtomic(f, path, mode, fill)
}

// writeAtomic fills the temp file f, fsyncs it, renames it to path and
// fsyncs the directory; on failure f is removed and path left as it was.
func writeAtomic(f *os.File, path string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the rename itself durable. Some filesystems cannot fsync a
// directory (EINVAL); the rename is then as durable as they allow.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// ReadFileLimit reads a small file (a key, a sealed blob) and refuses one
// over limit bytes without reading it whole: a wrong path or a hostile
// file must not cost memory.
func ReadFileLimit(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		clear(b)
		return nil, fmt.Errorf("%s is over %d bytes: not the file expected here", path, limit)
	}
	return b, nil
}
