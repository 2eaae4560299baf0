package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// boltBackend is the embedded default: one file, fsync on every commit.
type boltBackend struct {
	db    *bolt.DB
	path  string
	group *groupCommit
}

func openBolt(path string, readOnly bool) (*boltBackend, error) {
	// The free pages are not written at each commit but found again when
	// the store opens, as etcd does: a commit of release records wrote a
	// page or more of free-page ids besides its own, in front of each
	// fsync. Opening a store of 100,000 records (630 MB) then takes about
	// half a second more, five from a cold page cache. The map form keeps
	// a long free list quick to allocate from.
	opts := &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType}
	busy := "another process holds the store (is a founder already running?)"
	if readOnly {
		if _, err := os.Stat(path); err != nil {
			if shown := RedactDSN(path); shown != path {
				return nil, fmt.Errorf("open %s: no such store", shown)
			}
			return nil, err
		}
		opts = &bolt.Options{ReadOnly: true, Timeout: time.Second}
		busy = "a running founder holds the store; ask it instead (the command does so through DIR/control.sock when it can)"
	}
	b, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		// What is opened as a file may be a DSN mistyped: never echo a
		// password (SPEC 16.10).
		shown := RedactDSN(path)
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open %s: %s", shown, busy)
		}
		if shown != path {
			return nil, fmt.Errorf("open %s: cannot open the store (a database DSN must be postgres://... or keyword form)", shown)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Every commit is fsynced: acknowledged writes must survive kill -9.
	b.NoSync = false
	return &boltBackend{db: b, path: path, group: &groupCommit{db: b, filled: make(chan struct{}, 1)}}, nil
}

func (b *boltBackend) update(fn func(kv) error) error {
	return b.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (b *boltBackend) batch(fn func(kv) error) error {
	return b.group.do(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (b *boltBackend) view(fn func(kv) error) error {
	return b.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (b *boltBackend) close() error  { return b.db.Close() }
func (b *boltBackend) where() string { return b.path }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) writable() bool { return t.tx.Writable() }

// bucketForWrite creates a bucket on first write, as every store before
// the schema registry did.
func (t boltTx) bucketForWrite(name string) (*bolt.Bucket, error) {
	if b := t.tx.Bucket([]byte(name)); b != nil {
		return b, nil
	}
	if !t.tx.Writable() {
		return nil, ErrReadOnly
	}
	return t.tx.CreateBucket([]byte(name))
}

// packedFill is how full an Appended bucket's split pages are: etcd's
// figure for its revisions; the 10% left lets a late key in without a
// split.
const packedFill = 0.9

func (t boltTx) packPages(name string) error {
	b, err := t.bucketForWrite(name)
	if err != nil {
		return err
	}
	b.FillPercent = packedFill
	return nil
}

func (t boltTx) createBucket(name string) error {
	_, err := t.tx.CreateBucketIfNotExists([]byte(name))
	return err
}

func (t boltTx) get(bucket string, key []byte) ([]byte, error) {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil, nil
	}
	return b.Get(key), nil
}

func (t boltTx) put(bucket string, key, value []byte) error {
	b, err := t.bucketForWrite(bucket)
	if err != nil {
		return err
	}
	return b.Put(key, value)
}

func (t boltTx) del(bucket string, key []byte) error {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	if !t.tx.Writable() {
		return ErrReadOnly
	}
	return b.Delete(key)
}

func (t boltTx) delPrefix(bucket string, prefix []byte) error {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	if !t.tx.Writable() {
		return ErrReadOnly
	}
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

func (t boltTx) scan(bucket string, from []byte, fn func(k, v []byte) (bool, error)) error {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	c := b.Cursor()
	var k, v []byte
	if from == nil {
		k, v = c.First()
	} else {
		k, v = c.Seek(from)
	}
	for ; k != nil; k, v = c.Next() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t boltTx) last(bucket string) ([]byte, []byte, error) {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil, nil, nil
	}
	k, v := b.Cursor().Last()
	return k, v, nil
}

func (t boltTx) nextSequence(bucket string) (uint64, error) {
	b, err := t.bucketForWrite(bucket)
	if err != nil {
		return 0, err
	}
	return b.NextSequence()
}

func (t boltTx) sequence(bucket string) (uint64, error) {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return 0, nil
	}
	return b.Sequence(), nil
}
