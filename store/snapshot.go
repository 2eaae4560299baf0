package store

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CheckFile runs bbolt's consistency check (every page reachable once,
// none freed and in use, keys in order) over a bbolt file, such as a
// restored copy before it replaces anything, and names the first
// problems. bbolt asserts on a damaged page when it reads one, so every
// bucket and key is read first in this goroutine, where such a panic (or
// a fault on the mapped file) is caught and reported.
func CheckFile(path string) (err error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("not a valid store: %w", err)
	}
	defer b.Close()
	if err := readEverything(b); err != nil {
		return err
	}
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

// readEverything reads every bucket, key and value of b; a damaged page
// is an error, not a crash.
func readEverything(b *bolt.DB) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the store fails bbolt's consistency check: %v", r)
		}
	}()
	var walk func(bk *bolt.Bucket) error
	walk = func(bk *bolt.Bucket) error {
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				if child := bk.Bucket(k); child != nil {
					return walk(child)
				}
			}
			return nil
		})
	}
	return b.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, bk *bolt.Bucket) error { return walk(bk) })
	})
}
