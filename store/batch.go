package store

// Batch runs fn in a read-write transaction that it may share with other
// concurrent Batch calls: one commit, one fsync for all of them (group
// commit; bbolt's DB.Batch on the embedded backend). It returns, like
// Update, only once fn's writes are durable, and then runs fn's OnCommit
// hooks and notes.
//
// fn may run more than once (a batch in which another call failed is
// retried without it; a failing fn is retried alone), so fn must only
// write through tx and hand results out by assignment, as Update's
// callers already do. Use it on paths that many clients hit at once
// (registrations); a lone Batch waits up to bbolt's MaxBatchDelay.
func (db *DB) Batch(fn func(tx *Tx) error) error {
	tx, err := db.batch(fn)
	if err != nil {
		return err
	}
	for _, h := range tx.hooks {
		h()
	}
	db.bus.deliver(tx.notes)
	return nil
}

func (db *DB) batch(fn func(tx *Tx) error) (*Tx, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, ErrClosed
	}
	var done *Tx
	err := db.be.batch(func(k kv) error {
		// A fresh Tx per run: a retried fn replaces what an earlier run
		// of it announced.
		tx := &Tx{kv: k, db: db}
		if err := fn(tx); err != nil {
			return err
		}
		if tx.err != nil {
			return tx.err
		}
		if err := tx.publish(); err != nil {
			return err
		}
		done = tx
		return nil
	})
	return done, err
}
