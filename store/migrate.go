package store

import (
	"encoding/binary"
	"fmt"
)

const schemaKey = "schema"

// schemaOf returns the schema version recorded in tx.
func schemaOf(tx *Tx) uint64 {
	v := metaBucket.Get(tx, schemaKey)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (db *DB) newerSchemaError(current uint64) error {
	return fmt.Errorf("store %s has schema %d, newer than this binary's %d: run a newer stratum", db.Where(), current, SchemaVersion())
}

func (db *DB) checkNotNewer() error {
	var current uint64
	if err := db.View(func(tx *Tx) error { current = schemaOf(tx); return nil }); err != nil {
		return err
	}
	if current > uint64(SchemaVersion()) {
		return db.newerSchemaError(current)
	}
	return nil
}

// migrate runs every registered migration above the store's version, each
// in its own transaction that also records the new version. Write
// transactions are serialized, so replicas starting together migrate once.
func (db *DB) migrate() error {
	var start uint64
	if err := db.View(func(tx *Tx) error { start = schemaOf(tx); return nil }); err != nil {
		return err
	}
	if start < db.schemaFloor {
		return &SchemaSetBackError{Store: start, Floor: db.schemaFloor}
	}
	// Below recordMACSchema records are read and written as that schema
	// stored them: without MACs.
	db.macs.legacy.Store(start < recordMACSchema)
	defer db.macs.legacy.Store(false)
	for v := 1; v < len(migrations); v++ {
		m := migrations[v]
		if uint64(v) <= start {
			continue // a read first: a write transaction fsyncs even when it changes nothing
		}
		err := db.Update(func(tx *Tx) error {
			current := schemaOf(tx)
			if current > uint64(SchemaVersion()) {
				return db.newerSchemaError(current)
			}
			if current >= uint64(v) {
				return nil
			}
			if err := m.run(tx); err != nil {
				return fmt.Errorf("store: migration %d (%s): %w", v, m.name, err)
			}
			var buf [8]byte
			binary.BigEndian.PutUint64(buf[:], uint64(v))
			return metaBucket.Put(tx, schemaKey, buf[:])
		})
		if err != nil {
			return err
		}
		if v == recordMACSchema {
			db.macs.legacy.Store(false)
		}
	}
	return db.checkNotNewer()
}

// Schema returns the store's schema version.
func (db *DB) Schema() int {
	var v uint64
	_ = db.View(func(tx *Tx) error { v = schemaOf(tx); return nil })
	return int(v)
}

// SchemaSetBackError refuses a store whose schema level is below the level
// it was already run at: set back, nothing migrated.
type SchemaSetBackError struct{ Store, Floor uint64 }

func (e *SchemaSetBackError) Error() string {
	return fmt.Sprintf("the store's schema level is %d, below level %d this founder already ran it at: the level was set back (so that a migration would sign rows written without the data key); nothing was migrated. Restore from a backup; if you restored an older backup on purpose, start once with --accept-audit-rollback", e.Store, e.Floor)
}
