// Package storetest opens temporary stores for the tests of the packages
// above the store. It is imported by tests only.
package storetest

import (
	"bytes"
	"path/filepath"
	"testing"

	"stratum/crypto"
	"stratum/store"
	"stratum/wire"
)

// Key is the fixed data key of the stores Open opens: a store opened
// twice (two replicas of one database) reads what the other wrote.
func Key(tb testing.TB) *crypto.DataKey {
	tb.Helper()
	key, err := crypto.NewDataKey(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// Open opens the store at target (a bbolt file or a PostgreSQL DSN)
// under Key; it is closed when the test ends.
func Open(tb testing.TB, target string) *store.DB {
	tb.Helper()
	db, err := store.Open(target, Key(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Temp opens a bbolt store in a new temporary data directory; it returns
// the store and the directory.
func Temp(tb testing.TB) (*store.DB, string) {
	tb.Helper()
	dir := tb.TempDir()
	return Open(tb, filepath.Join(dir, "stratum.db")), dir
}

// AuditEventsOf is each of db's first 10,000 audit events of kind.
func AuditEventsOf(tb testing.TB, db *store.DB, kind string) []wire.AuditEvent {
	tb.Helper()
	evs, err := db.AuditEvents(0, 10000)
	if err != nil {
		tb.Fatal(err)
	}
	var out []wire.AuditEvent
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// AuditKinds is "kind:subject" of each of db's first 1000 audit events.
func AuditKinds(tb testing.TB, db *store.DB) []string {
	tb.Helper()
	evs, err := db.AuditEvents(0, 1000)
	if err != nil {
		tb.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind+":"+e.Subject)
	}
	return kinds
}
