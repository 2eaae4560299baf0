package store

import "sync"

// Notifications: Tx.Notify announces a committed change on a topic, and
// every replica's subscribers of that topic hear it after the commit. On
// bbolt that is this process; on PostgreSQL the note also travels by
// NOTIFY to the other replicas (see postgres_listen.go).

type note struct{ topic, payload string }

// Everything is the payload a subscriber gets when notes may have been
// missed (a replica lost its database connection): re-read all.
const Everything = ""

type bus struct {
	mu     sync.RWMutex
	subs   map[string][]func(payload string)
	closed bool
}

func (b *bus) init() { b.subs = map[string][]func(string){} }

func (b *bus) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

func (b *bus) deliver(notes []note) {
	if len(notes) == 0 {
		return
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return // Close holds the store: a subscriber reading it would wait forever
	}
	for _, n := range notes {
		for _, fn := range b.subs[n.topic] {
			fn(n.payload)
		}
	}
}

// deliverEverything tells every subscriber to re-read all it watches (a
// replica's LISTEN connection was lost, or is back).
func (b *bus) deliverEverything() {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return
	}
	for _, fns := range b.subs {
		for _, fn := range fns {
			fn(Everything)
		}
	}
}

// Subscribe calls fn with the payload of every committed Notify on topic,
// from any replica. fn runs on the notifying goroutine: keep it short.
func (db *DB) Subscribe(topic string, fn func(payload string)) {
	db.bus.mu.Lock()
	defer db.bus.mu.Unlock()
	db.bus.subs[topic] = append(db.bus.subs[topic], fn)
}

// Notify announces payload on topic once the transaction commits, to the
// subscribers of every replica. Payloads are short identifiers.
func (tx *Tx) Notify(topic, payload string) {
	tx.notes = append(tx.notes, note{topic, payload})
}

// announcer is a backend transaction that carries notes to other replicas.
type announcer interface{ announce(notes []note) error }

// publish hands the notes to the backend inside the transaction, so they
// leave with the commit and never without it.
func (tx *Tx) publish() error {
	if a, ok := tx.kv.(announcer); ok && len(tx.notes) > 0 {
		return a.announce(tx.notes)
	}
	return nil
}
