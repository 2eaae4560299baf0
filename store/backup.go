package store

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"

	"stratum/crypto"
)

// Backup writes a consistent zstd-compressed snapshot of the store to w
// while others keep writing (a read transaction sees one commit).
func (db *DB) Backup(w io.Writer) (int64, error) {
	zw, err := zstd.NewWriter(w)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.be.snapshot(func(_ kv, _ int64, write func(io.Writer) (int64, error)) error {
		var werr error
		n, werr = write(zw)
		return werr
	})
	if err != nil {
		zw.Close()
		return n, err
	}
	return n, zw.Close()
}

// BackupFile opens the store at path read-only-compatible and writes a
// snapshot to out atomically. A running founder holds the file lock, so a
// live backup goes through the admin API or bbolt's shared read lock.
func BackupFile(path, out string) (int64, error) {
	return writeAtomic(out, func(w io.Writer) (int64, error) { return SnapshotFile(path, w) })
}

// SnapshotFile writes a zstd snapshot of the (not running) store at path
// to w, for callers that frame or encrypt the stream.
func SnapshotFile(path string, w io.Writer) (int64, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer b.Close()
	zw, err := zstd.NewWriter(w)
	if err != nil {
		return 0, err
	}
	var n int64
	err = b.View(func(tx *bolt.Tx) error {
		var werr error
		n, werr = tx.WriteTo(zw)
		return werr
	})
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// Restore decompresses a snapshot into path, refusing to overwrite.
func Restore(in, path string) (int64, error) {
	if _, err := os.Stat(path); err == nil {
		return 0, fmt.Errorf("%s exists: restore into an empty data directory", path)
	}
	f, err := os.Open(in)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return RestoreReader(f, path)
}

// RestoreReader decompresses the zstd snapshot r into path, refusing to
// overwrite. Nothing is left at path unless the whole stream read cleanly
// and the result opens as a store.
func RestoreReader(r io.Reader, path string) (int64, error) {
	if _, err := os.Stat(path); err == nil {
		return 0, fmt.Errorf("%s exists: restore into an empty data directory", path)
	}
	zr, err := zstd.NewReader(r)
	if err != nil {
		return 0, err
	}
	defer zr.Close()
	n, err := writeAtomic(path, func(w io.Writer) (int64, error) { return io.Copy(w, zr) })
	if err != nil {
		return n, err
	}
	// Prove the result is a store this binary can open.
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		os.Remove(path)
		return n, fmt.Errorf("restored file is not a valid store: %w", err)
	}
	return n, b.Close()
}

// writeAtomic writes what fill writes to path through the one atomic
// writer (temp file, fsync, rename, directory fsync) at mode 0600 and
// answers how many bytes fill wrote.
func writeAtomic(path string, fill func(io.Writer) (int64, error)) (int64, error) {
	var n int64
	err := crypto.WriteFileAtomicFunc(path, 0o600, func(w io.Writer) error {
		var err error
		n, err = fill(w)
		return err
	})
	return n, err
}
