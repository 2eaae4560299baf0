// Package store keeps the founder's state: typed JSON values in declared
// buckets, sealed secrets, the schema version with its migrations, the
// hash-chained audit log and consistent backups. The bytes live in one
// bbolt file (the default) or in a PostgreSQL database shared by several
// founder replicas; see backend.go. It knows transactions, not the rules
// of the domains that use it.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
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
	be     backend
	sealer Sealer
	path   string

	mu     sync.RWMutex
	closed bool

	bus  bus
	macs macs

	// auditWatch hears each committed advance of the audit chain (see
	// OnAudit).
	auditWatch atomic.Pointer[func(AuditMark)]

	// schemaFloor is the lowest schema level Open migrates from (see
	// SchemaFloor); 0 for none.
	schemaFloor uint64

	// the audit chain's key (auditKey), derived once
	auditKeyOnce sync.Once
	auditKeyVal  []byte
	auditKeyErr  error
	// lastLink is the keyed link of the newest event appended here.
	lastLink lastAuditLink
}

// isPostgres reports whether target names a PostgreSQL database rather
// than a bbolt file.
func isPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://") || keywordDSN.MatchString(target)
}

// keywordDSN is a libpq keyword/value connection string ("host=db
// user=stratum password=... dbname=stratum"): a database, never a path.
var keywordDSN = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|sslmode|service)\s*=`)

var keywordPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactDSN is s with any database password replaced by xxxxx, in the URL
// form (postgres://user:PASSWORD@host/db) and in the keyword form
// (password=PASSWORD): what errors and logs may show (SPEC 16.10).
func RedactDSN(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return keywordPassword.ReplaceAllString(s, "${1}xxxxx")
}

// NeedDatabase refuses a target that names a bbolt file rather than a
// database, for what only a database can be (migrate --to).
func NeedDatabase(target string) error {
	if !isPostgres(target) {
		return errors.New("not a postgres:// DSN")
	}
	return nil
}

// OpenOption qualifies Open.
type OpenOption func(*DB)

// SchemaFloor makes Open refuse, before any migration runs, a store whose
// schema level is below level: the level a founder already ran this store
// at (its audit high-water mark, outside the store, says so). Setting the
// level back, with every MAC stripped and the marks of the MAC and keyed
// audit migrations removed, would otherwise have those migrations sign
// rows written without the data key (SPEC 16.2).
func SchemaFloor(level int) OpenOption {
	return func(db *DB) {
		if level > 0 {
			db.schemaFloor = uint64(level)
		}
	}
}

// Open opens the store at target: a bbolt file path (created when absent)
// or a postgres:// DSN. It runs pending migrations and refuses a store
// written by a newer binary.
func Open(target string, sealer Sealer, opts ...OpenOption) (*DB, error) {
	var be backend
	var err error
	if isPostgres(target) {
		be, err = openPostgres(target, sealer)
	} else {
		be, err = openBolt(target, false)
	}
	if err != nil {
		return nil, err
	}
	db := newDB(be, sealer, target)
	for _, o := range opts {
		o(db)
	}
	if err := db.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	db.start()
	return db, nil
}

// OpenReadOnly opens the store for reading only (backup, audit verify).
// sealer may be nil: sealed values then stay sealed and authenticated
// records cannot be read.
func OpenReadOnly(target string, sealer Sealer) (*DB, error) {
	var be backend
	var err error
	if isPostgres(target) {
		be, err = openPostgres(target, nil)
	} else {
		be, err = openBolt(target, true)
	}
	if err != nil {
		return nil, err
	}
	db := newDB(be, sealer, target)
	if err := db.checkNotNewer(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func newDB(be backend, sealer Sealer, target string) *DB {
	db := &DB{be: be, sealer: sealer, path: target}
	db.bus.init()
	return db
}

// Path is where the store lives: the bbolt file, or the DSN.
func (db *DB) Path() string { return db.path }

// Where names the store for messages: the file, or the database host
// (never its password).
func (db *DB) Where() string { return db.be.where() }

// Close waits for running transactions and closes the store.
func (db *DB) Close() error {
	// Subscribers first, before the close lock: one that is reading the
	// store (a cache reloading) finishes, and no later note reaches one.
	db.bus.close()
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	return db.be.close()
}

// Update runs fn in a read-write transaction. When fn returns nil the
// transaction is committed (and durable) before the OnCommit hooks run;
// when it returns an error nothing it wrote is kept. Write transactions
// run one at a time, across every replica of a shared database.
func (db *DB) Update(fn func(tx *Tx) error) error {
	return db.write(db.be.update, fn)
}

// write runs fn through a backend's update or batch, then the hooks and
// notes of the attempt that committed.
func (db *DB) write(run func(func(kv) error) error, fn func(tx *Tx) error) error {
	tx, err := db.update(run, fn)
	if err != nil {
		return err
	}
	for _, h := range tx.hooks {
		h()
	}
	db.bus.deliver(tx.notes)
	return nil
}

// update holds the close lock only around the transaction, released even
// when fn panics, so a recovered handler panic never blocks Close.
func (db *DB) update(run func(func(kv) error) error, fn func(tx *Tx) error) (*Tx, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, ErrClosed
	}
	var done *Tx
	err := run(func(k kv) error {
		// A fresh Tx per attempt: a retried transaction (or a batch run
		// again) keeps no hooks or notes from an attempt that failed.
		tx := &Tx{kv: k, db: db}
		if err := fn(tx); err != nil {
			return err
		}
		if tx.err != nil {
			return tx.err
		}
		if err := tx.sealAuditHead(); err != nil {
			return err
		}
		if err := tx.publish(); err != nil {
			return err
		}
		done = tx
		return nil
	})
	return done, err
}

// View runs fn in a read-only transaction.
func (db *DB) View(fn func(tx *Tx) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	return db.be.view(func(k kv) error {
		tx := &Tx{kv: k, db: db}
		if err := fn(tx); err != nil {
			return err
		}
		return tx.err
	})
}

// Tx is one transaction.
type Tx struct {
	kv    kv
	db    *DB
	hooks []func()
	notes []note
	// err is the first backend failure a method without an error result
	// (RawBucket.Get) met; the transaction then fails as a whole.
	err error
	// auditHead is the end of the chain after the last event this
	// transaction appended, sealed into the store by sealAuditHead.
	auditHead *auditHead
}

// OnCommit runs fn after the transaction has been committed and is
// durable, so that waiters are woken only by state that is durable. It
// runs on this replica only; see Notify for every replica.
func (tx *Tx) OnCommit(fn func()) { tx.hooks = append(tx.hooks, fn) }

// Writable reports whether tx may write.
func (tx *Tx) Writable() bool { return tx.kv.writable() }

func (tx *Tx) fail(err error) {
	if tx.err == nil {
		tx.err = err
	}
}

// createBuckets makes the named buckets (migrations).
func (tx *Tx) createBuckets(names ...string) error {
	for _, name := range names {
		if err := tx.kv.createBucket(name); err != nil {
			return err
		}
	}
	return nil
}

// getJSON decodes the value at bucket/key into v; found is false when absent.
func (tx *Tx) getJSON(b bucketSpec, key string, v any) (found bool, err error) {
	raw, err := tx.get(b, key)
	if err != nil || raw == nil {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("store: decode %s/%s: %w", b.name, key, err)
	}
	return true, nil
}

// get returns the record at bucket/key, its MAC checked and removed in an
// authenticated bucket (a record whose MAC fails is absent), or nil.
func (tx *Tx) get(b bucketSpec, key string) ([]byte, error) {
	raw, err := tx.kv.get(b.name, []byte(key))
	if err != nil {
		return nil, err
	}
	return tx.open(b, key, raw)
}

// open is get's answer for raw, the stored bytes at bucket/key (nil when
// absent).
func (tx *Tx) open(b bucketSpec, key string, raw []byte) ([]byte, error) {
	if raw == nil || !b.authenticated {
		return raw, nil
	}
	if !b.remembered {
		return tx.openRecord(b.name, key, raw)
	}
	if payload := tx.db.macs.recall(b.name, key, raw); payload != nil {
		return payload, nil
	}
	payload, err := tx.openRecord(b.name, key, raw)
	if err != nil || payload == nil {
		return payload, err
	}
	if kept := tx.db.macs.remember(b.name, key, raw); kept != nil {
		return kept, nil
	}
	// MACs off for migrations: nothing remembered, still a copy of its own.
	return bytes.Clone(payload), nil
}

// getRaw is get whose backend failure fails the whole transaction.
func (tx *Tx) getRaw(b bucketSpec, key string) []byte {
	raw, err := tx.get(b, key)
	if err != nil {
		tx.fail(err)
		return nil
	}
	return raw
}

// putJSON stores v at bucket/key.
func (tx *Tx) putJSON(b bucketSpec, key string, v any) error {
	_, err := tx.storeJSON(b, key, v)
	return err
}

// storeJSON is putJSON answering the bytes it stored.
func (tx *Tx) storeJSON(b bucketSpec, key string, v any) ([]byte, error) {
	if e, ok := v.(Encoded); ok {
		if raw, ok := e.EncodedJSON(); ok {
			return tx.storeRaw(b, key, raw)
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: encode %s/%s: %w", b.name, key, err)
	}
	return tx.storeRaw(b, key, raw)
}

// putRaw stores raw bytes at bucket/key, with their MAC in an
// authenticated bucket.
func (tx *Tx) putRaw(b bucketSpec, key string, raw []byte) error {
	_, err := tx.storeRaw(b, key, raw)
	return err
}

// storeRaw is putRaw answering the bytes it stored: raw, behind its MAC
// in an authenticated bucket.
func (tx *Tx) storeRaw(b bucketSpec, key string, raw []byte) ([]byte, error) {
	if b.authenticated {
		var err error
		if raw, err = tx.sealRecord(b.name, key, raw); err != nil {
			return nil, err
		}
	}
	if err := tx.kvPut(b, []byte(key), raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// macChecked says whether bytes read from (or written to) bucket b are
// held to their MAC now: not while migrations run with MACs off.
func (tx *Tx) macChecked(b bucketSpec) bool {
	return !b.authenticated || !tx.db.macs.legacy.Load()
}

// pagePacker is a backend that can split a bucket's full pages full
// (bbolt's fill percent; PostgreSQL has no pages of its own to pack).
type pagePacker interface{ packPages(bucket string) error }

// kvPut stores raw under a declared bucket's key, packing the pages of an
// Appended bucket.
func (tx *Tx) kvPut(b bucketSpec, key, raw []byte) error {
	if p, ok := tx.kv.(pagePacker); ok && b.appended {
		if err := p.packPages(b.name); err != nil {
			return err
		}
	}
	return tx.kv.put(b.name, key, raw)
}

// delete removes bucket/key; absent keys are not an error.
func (tx *Tx) delete(b bucketSpec, key string) error {
	return tx.kv.del(b.name, []byte(key))
}

// forEach calls fn for each record of bucket in key order; in an
// authenticated bucket a record whose MAC fails is skipped.
func (tx *Tx) forEach(b bucketSpec, fn func(key string, raw []byte) error) error {
	return tx.kv.scan(b.name, nil, func(k, v []byte) (bool, error) {
		if b.authenticated {
			var err error
			if v, err = tx.openRecord(b.name, string(k), v); err != nil || v == nil {
				return err == nil, err
			}
		}
		return true, fn(string(k), v)
	})
}

// putSealed seals plaintext under the data key and stores it. The bucket
// and key are bound as additional data, so a sealed value moved elsewhere
// in the store does not open.
func (tx *Tx) putSealed(b bucketSpec, key string, plaintext []byte) error {
	if tx.db.sealer == nil {
		return errNoSealer
	}
	ct, err := tx.db.sealer.Seal(plaintext, []byte(b.name+"/"+key))
	if err != nil {
		return fmt.Errorf("store: seal %s/%s: %w", b.name, key, err)
	}
	return tx.putRaw(b, key, ct)
}

// getSealed opens the sealed value at bucket/key.
func (tx *Tx) getSealed(b bucketSpec, key string) ([]byte, bool, error) {
	ct, err := tx.get(b, key)
	if err != nil || ct == nil {
		return nil, false, err
	}
	if tx.db.sealer == nil {
		return nil, true, errNoSealer
	}
	pt, err := tx.db.sealer.Open(ct, []byte(b.name+"/"+key))
	if err != nil {
		return nil, true, fmt.Errorf("store: open sealed %s/%s: %w (is data.key the one this store was created with?)", b.name, key, err)
	}
	return pt, true, nil
}
