package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

const metaBucket = "meta"

// SchemaVersion is the newest schema this binary writes.
const SchemaVersion = 1

// migrations[i] brings a store from schema i to i+1, in one transaction.
var migrations = []func(tx *bolt.Tx) error{
	// 0 -> 1: the buckets every founder has.
	func(tx *bolt.Tx) error {
		for _, name := range []string{metaBucket, AuditBucket} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	},
}

// SchemaOf returns the schema version recorded in tx.
func schemaOf(tx *bolt.Tx) uint64 {
	b := tx.Bucket([]byte(metaBucket))
	if b == nil {
		return 0
	}
	v := b.Get([]byte("schema"))
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (db *DB) migrate() error {
	var current uint64
	if err := db.bolt.View(func(tx *bolt.Tx) error { current = schemaOf(tx); return nil }); err != nil {
		return err
	}
	if current > SchemaVersion {
		return fmt.Errorf("store %s has schema %d, newer than this binary's %d: run a newer stratum", db.path, current, SchemaVersion)
	}
	for v := current; v < SchemaVersion; v++ {
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			if err := migrations[v](tx); err != nil {
				return err
			}
			b, err := tx.CreateBucketIfNotExists([]byte(metaBucket))
			if err != nil {
				return err
			}
			var buf [8]byte
			binary.BigEndian.PutUint64(buf[:], v+1)
			return b.Put([]byte("schema"), buf[:])
		})
		if err != nil {
			return fmt.Errorf("store: migration %d -> %d: %w", v, v+1, err)
		}
	}
	return nil
}

// Schema returns the store's schema version.
func (db *DB) Schema() int {
	var v uint64
	_ = db.View(func(tx *Tx) error { v = schemaOf(tx.btx); return nil })
	return int(v)
}
