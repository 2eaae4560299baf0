package store

import (
	"bytes"
	"path/filepath"
	"testing"

	"stratum/crypto"
)

func openAuditStore(t *testing.T) *DB {
	t.Helper()
	key, err := crypto.NewDataKey(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(filepath.Join(t.TempDir(), "s.db"), key)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestReaderVerdict: an intact chain counts its events; a closed store
// is an error, not a verdict.
func TestReaderVerdict(t *testing.T) {
	db := openAuditStore(t)
	for i := range 3 {
		if err := db.Update(func(tx *Tx) error {
			return tx.Audit("test.event", "test", string(rune('a'+i)), nil)
		}); err != nil {
			t.Fatal(err)
		}
	}
	r := AuditReader{DB: db}
	v, err := r.Verify()
	if err != nil || !v.Intact || v.Events < 3 || v.Problem != "" {
		t.Fatalf("Verify = %+v, %v; want intact with at least 3 events", v, err)
	}
	events, err := r.Events(0, 2)
	if err != nil || len(events) != 2 {
		t.Fatalf("Events(0, 2) = %d events, %v", len(events), err)
	}
	db.Close()
	if _, err := r.Verify(); err == nil {
		t.Fatal("Verify on a closed store gave a verdict")
	}
}
