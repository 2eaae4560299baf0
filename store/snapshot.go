package store

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Snapshot runs fn inside one read transaction of the bbolt store (others
// keep writing meanwhile) with the copy's size and a function that writes
// its bytes, for callers that frame the copy themselves (backups); tx
// reads the same commit the copy holds.
func (db *DB) Snapshot(fn func(tx *Tx, size int64, write func(io.Writer) error) error) error {
	return db.View(func(tx *Tx) error {
		btx := boltOf(tx)
		if btx == nil {
			return errNotAFile
		}
		return fn(tx, btx.Size(), func(w io.Writer) error { _, err := btx.WriteTo(w); return err })
	})
}

// CheckFile runs bbolt's consistency check (every page reachable once,
// none freed and in use, keys in order) over a bbolt file, such as a
// restored copy before it replaces anything, and names the first
// problems.
func CheckFile(path string) (err error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("not a valid store: %w", err)
	}
	defer b.Close()
	var problems []string
	err = b.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			if len(problems) < 5 {
				problems = append(problems, e.Error())
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return errors.New("the store fails bbolt's consistency check: " + strings.Join(problems, "; "))
	}
	return nil
}
