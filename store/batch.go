package store

import bolt "go.etcd.io/bbolt"

// Batch runs fn in a read-write transaction that it may share with other
// concurrent Batch calls: one commit, one fsync for all of them (group
// commit, bbolt's DB.Batch). It returns, like Update, only once fn's
// writes are durable, and then runs fn's OnCommit hooks.
//
// fn may run more than once (a batch in which another call failed is
// retried without it; a failing fn is retried alone), so fn must only
// write through tx and hand results out by assignment, as Update's
// callers already do. Use it on paths that many clients hit at once
// (registrations); a lone Batch waits up to bbolt's MaxBatchDelay.
func (db *DB) Batch(fn func(tx *Tx) error) error {
	hooks, err := db.batch(fn)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		h()
	}
	return nil
}

func (db *DB) batch(fn func(tx *Tx) error) ([]func(), error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, ErrClosed
	}
	var hooks []func()
	err := db.bolt.Batch(func(btx *bolt.Tx) error {
		tx := &Tx{btx: btx, db: db}
		if err := fn(tx); err != nil {
			return err
		}
		// A retried fn replaces what an earlier run of it announced.
		hooks = tx.hooks
		return nil
	})
	return hooks, err
}
