package store

import "errors"

// A backend is where the bytes live: a bbolt file (the embedded default)
// or a PostgreSQL database shared by several founders (SPEC section 13).
// Both give the Tx API the same meaning: a transaction sees one commit,
// write transactions run one at a time, a committed write is durable
// before Update returns, and a failed transaction leaves nothing behind.
type backend interface {
	// update runs fn in a read-write transaction and commits when fn
	// returns nil. It may run fn again after a serialization failure,
	// so fn must not keep state from an earlier attempt.
	update(fn func(kv) error) error
	// batch is update that may share one commit with concurrent batch
	// calls; fn may run more than once.
	batch(fn func(kv) error) error
	// view runs fn in a read-only transaction on one snapshot.
	view(fn func(kv) error) error
	close() error
	// where names the store in messages (a path, or a host without its
	// password).
	where() string
	abilities
}

// kv is one backend transaction. Keys are compared as bytes; scan visits
// them in that order.
type kv interface {
	get(bucket string, key []byte) ([]byte, error)
	put(bucket string, key, value []byte) error
	del(bucket string, key []byte) error
	// delPrefix removes every key that starts with prefix.
	delPrefix(bucket string, prefix []byte) error
	// scan calls fn for each key >= from in order until fn answers false.
	scan(bucket string, from []byte, fn func(k, v []byte) (bool, error)) error
	// last returns the greatest key and its value, or nil.
	last(bucket string) (k, v []byte, err error)
	nextSequence(bucket string) (uint64, error)
	// sequence is the bucket's last nextSequence value, without moving it.
	sequence(bucket string) (uint64, error)
	createBucket(name string) error
	writable() bool
}

// ErrReadOnly is returned for a write in a View.
var ErrReadOnly = errors.New("store: write in a read-only transaction")

// ErrUnavailable wraps a failure to reach the database (SPEC section 13:
// a replica that loses its database answers 503 UNAVAILABLE and retries).
var ErrUnavailable = errors.New("store: database unavailable")
