package store

// Batch runs fn in a read-write transaction that it may share with other
// concurrent Batch calls: one commit, one fsync for all of them (group
// commit: a call that finds no commit running starts one at once, calls
// arriving meanwhile share the next; after a shared commit the next one
// waits up to 2 ms for 16 calls). It returns, like Update, only once fn's
// writes are durable, and then runs fn's OnCommit hooks and delivers its
// notes. On PostgreSQL it is Update (the server commits concurrent
// writers' WAL together by itself).
//
// fn may run more than once (a batch in which another call failed is
// retried without it; a failing fn is retried alone), so fn must only
// write through tx and hand results out by assignment, as Update's
// callers already do. Use it on paths that many clients hit at once
// (registrations, release records); a lone Batch does not wait.
func (db *DB) Batch(fn func(tx *Tx) error) error {
	return db.write(db.be.batch, fn)
}
