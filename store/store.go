// Package store keeps the founder's state in one bbolt file: typed JSON
// values in named buckets, sealed secrets, the schema version with its
// migrations, the hash-chained audit log and consistent backups. It knows
// transactions, not the rules of the domains that use it.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrClosed is returned once the store is closed (shutdown).
var ErrClosed = errors.New("store: closed")

// errNoSealer: a store opened read-only has no data key.
var errNoSealer = errors.New("store: opened without the data key; sealed values stay sealed")

// Sealer encrypts secrets before they reach the file.
type Sealer interface {
	Seal(plaintext, additionalData []byte) ([]byte, error)
	Open(ciphertext, additionalData []byte) ([]byte, error)
}

// DB is an open store.
type DB struct {
	bolt   *bolt.DB
	sealer Sealer
	path   string

	mu     sync.RWMutex
	closed bool
}

// Open opens (creating when absent) the bbolt file at path, runs pending
// migrations and refuses a file written by a newer binary.
func Open(path string, sealer Sealer) (*DB, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open %s: another process holds the store (is a founder already running?)", path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Every commit is fsynced: acknowledged writes must survive kill -9.
	b.NoSync = false
	db := &DB{bolt: b, sealer: sealer, path: path}
	if err := db.migrate(); err != nil {
		b.Close()
		return nil, err
	}
	return db, nil
}

// Path is the file the store lives in.
func (db *DB) Path() string { return db.path }

// Close waits for running transactions and closes the file.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	return db.bolt.Close()
}

// Update runs fn in a read-write transaction. When fn returns nil the
// transaction is committed (and fsynced) before the OnCommit hooks run;
// when it returns an error nothing it wrote is kept.
func (db *DB) Update(fn func(tx *Tx) error) error {
	hooks, err := db.update(fn)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		h()
	}
	return nil
}

// update holds the close lock only around the transaction, released even
// when fn panics, so a recovered handler panic never blocks Close.
func (db *DB) update(fn func(tx *Tx) error) ([]func(), error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, ErrClosed
	}
	var hooks []func()
	err := db.bolt.Update(func(btx *bolt.Tx) error {
		tx := &Tx{btx: btx, db: db}
		if err := fn(tx); err != nil {
			return err
		}
		hooks = tx.hooks
		return nil
	})
	return hooks, err
}

// View runs fn in a read-only transaction.
func (db *DB) View(fn func(tx *Tx) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	return db.bolt.View(func(btx *bolt.Tx) error {
		return fn(&Tx{btx: btx, db: db})
	})
}

// Tx is one transaction.
type Tx struct {
	btx   *bolt.Tx
	db    *DB
	hooks []func()
}

// OnCommit runs fn after the transaction has been committed to disk, so
// that waiters are woken only by state that is durable.
func (tx *Tx) OnCommit(fn func()) { tx.hooks = append(tx.hooks, fn) }

// Writable reports whether tx may write.
func (tx *Tx) Writable() bool { return tx.btx.Writable() }

func (tx *Tx) bucket(name string) (*bolt.Bucket, error) {
	if b := tx.btx.Bucket([]byte(name)); b != nil {
		return b, nil
	}
	if !tx.btx.Writable() {
		return nil, berrors.ErrTxNotWritable
	}
	return tx.btx.CreateBucket([]byte(name))
}

// GetJSON decodes the value at bucket/key into v; found is false when absent.
func (tx *Tx) GetJSON(bucket, key string, v any) (found bool, err error) {
	raw := tx.GetRaw(bucket, key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("store: decode %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

// GetRaw returns the bytes at bucket/key (valid only inside tx), or nil.
func (tx *Tx) GetRaw(bucket, key string) []byte {
	b := tx.btx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	return b.Get([]byte(key))
}

// PutJSON stores v at bucket/key.
func (tx *Tx) PutJSON(bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %s/%s: %w", bucket, key, err)
	}
	return tx.PutRaw(bucket, key, raw)
}

// PutRaw stores raw bytes at bucket/key.
func (tx *Tx) PutRaw(bucket, key string, raw []byte) error {
	b, err := tx.bucket(bucket)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), raw)
}

// Delete removes bucket/key; absent keys are not an error.
func (tx *Tx) Delete(bucket, key string) error {
	b := tx.btx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	return b.Delete([]byte(key))
}

// ForEach calls fn for each key in bucket in key order.
func (tx *Tx) ForEach(bucket string, fn func(key string, raw []byte) error) error {
	b := tx.btx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error { return fn(string(k), v) })
}

// NextSequence returns a monotonically increasing number for bucket.
func (tx *Tx) NextSequence(bucket string) (uint64, error) {
	b, err := tx.bucket(bucket)
	if err != nil {
		return 0, err
	}
	return b.NextSequence()
}

// PutSealed seals plaintext under the data key and stores it. The bucket
// and key are bound as additional data, so a sealed value moved elsewhere
// in the file does not open.
func (tx *Tx) PutSealed(bucket, key string, plaintext []byte) error {
	if tx.db.sealer == nil {
		return errNoSealer
	}
	ct, err := tx.db.sealer.Seal(plaintext, []byte(bucket+"/"+key))
	if err != nil {
		return fmt.Errorf("store: seal %s/%s: %w", bucket, key, err)
	}
	return tx.PutRaw(bucket, key, ct)
}

// GetSealed opens the sealed value at bucket/key.
func (tx *Tx) GetSealed(bucket, key string) ([]byte, bool, error) {
	ct := tx.GetRaw(bucket, key)
	if ct == nil {
		return nil, false, nil
	}
	if tx.db.sealer == nil {
		return nil, true, errNoSealer
	}
	pt, err := tx.db.sealer.Open(ct, []byte(bucket+"/"+key))
	if err != nil {
		return nil, true, fmt.Errorf("store: open sealed %s/%s: %w (is data.key the one this store was created with?)", bucket, key, err)
	}
	return pt, true, nil
}

// OpenReadOnly opens the file for reading only (backup, audit verify),
// without a data key: sealed values stay sealed.
func OpenReadOnly(path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open %s: a running founder holds the store; ask it instead (the command does so through DIR/control.sock when it can)", path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db := &DB{bolt: b, path: path}
	if v := db.Schema(); v > SchemaVersion {
		b.Close()
		return nil, fmt.Errorf("store %s has schema %d, newer than this binary's %d: run a newer stratum", path, v, SchemaVersion)
	}
	return db, nil
}
