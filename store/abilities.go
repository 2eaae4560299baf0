package store

import (
	"errors"
	"io"

	bolt "go.etcd.io/bbolt"
)

// The store contract's abilities beyond transactions (SPEC 20): a
// byte-exact snapshot, a copy from one store into another, the lease for
// background work and the storage of release content. Each is a method of
// every backend, so no code outside store/ asks which backend it has.

// abilities is what every backend does besides transactions.
type abilities interface {
	// snapshot runs fn in one read transaction with the size of a
	// byte-exact copy and a function writing it; ErrNoSnapshot where the
	// backend has its own backup tools.
	snapshot(fn func(k kv, size int64, write func(io.Writer) (int64, error)) error) error
	// holdsLease reports whether this process holds the background lease.
	holdsLease() bool
	// shared reports whether other founders (and other database
	// sessions) share the store.
	shared() bool
}

// listBuckets is a backend transaction that can name its buckets (for a
// copy): each bucket holding a key or a sequence, with its sequence.
type listBuckets interface {
	buckets(fn func(name string, sequence uint64) error) error
}

func (b *boltBackend) snapshot(fn func(k kv, size int64, write func(io.Writer) (int64, error)) error) error {
	return b.view(func(k kv) error {
		btx := k.(boltTx).tx
		return fn(k, btx.Size(), btx.WriteTo)
	})
}

func (b *boltBackend) holdsLease() bool { return true } // one process holds the file
func (b *boltBackend) shared() bool     { return false }

func (t boltTx) buckets(fn func(name string, sequence uint64) error) error {
	return t.tx.ForEach(func(name []byte, b *bolt.Bucket) error { return fn(string(name), b.Sequence()) })
}

func (p *pgBackend) snapshot(func(kv, int64, func(io.Writer) (int64, error)) error) error {
	return ErrNoSnapshot
}

func (p *pgBackend) holdsLease() bool { return p.holds.Load() }
func (p *pgBackend) shared() bool     { return true }

func (t pgTx) buckets(fn func(name string, sequence uint64) error) error {
	rows, err := t.tx.Query(t.ctx, `SELECT b, COALESCE((SELECT value FROM stratum_seq s WHERE s.bucket = b), 0)
		FROM (SELECT DISTINCT bucket AS b FROM stratum_kv UNION SELECT bucket FROM stratum_seq) AS names ORDER BY b`)
	if err != nil {
		return t.err(err)
	}
	type named struct {
		name string
		seq  int64
	}
	var all []named
	for rows.Next() {
		var n named
		if err := rows.Scan(&n.name, &n.seq); err != nil {
			rows.Close()
			return t.err(err)
		}
		all = append(all, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t.err(err)
	}
	for _, n := range all {
		if err := fn(n.name, uint64(n.seq)); err != nil {
			return err
		}
	}
	return nil
}

// ErrNoSnapshot: a database has its own backup tools (docs/HA.md), so
// Snapshot refuses it with what to use instead.
var ErrNoSnapshot = errors.New("store: backup writes a bbolt file; back up a PostgreSQL store with pg_dump or the cluster's PITR")

// Snapshot runs fn inside one read transaction (others keep writing
// meanwhile) with the copy's size and a function that writes its bytes,
// for callers that frame the copy themselves (backups); tx reads the same
// commit the copy holds.
func (db *DB) Snapshot(fn func(tx *Tx, size int64, write func(io.Writer) error) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	return db.be.snapshot(func(k kv, size int64, write func(io.Writer) (int64, error)) error {
		tx := &Tx{kv: k, db: db}
		if err := fn(tx, size, func(w io.Writer) error { _, err := write(w); return err }); err != nil {
			return err
		}
		return tx.err
	})
}

// HoldsLease reports whether this replica holds the background lease
// (delivery timeouts, purges, the prober, admission release). One
// replica of a shared database holds it at a time; when its connection
// dies the lock goes with it and another replica takes it within a
// second. A bbolt file's only process always holds it.
func (db *DB) HoldsLease() bool { return db.be.holdsLease() }

// KeepsContent reports whether release content must be kept in the store
// (content storage): several founders serve from this store, and a
// replica that did not import a release fills its cache from it. A bbolt
// store's founder serves the imported tree itself.
func (db *DB) KeepsContent() bool { return db.be.shared() }

// SharesLocks reports whether the store's writer lock and lease are held
// in a database other sessions reach (ForeignHolders can name one that is
// not a founder's).
func (db *DB) SharesLocks() bool { return db.be.shared() }
