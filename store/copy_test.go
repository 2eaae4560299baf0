package store

import (
	"path/filepath"
	"strings"
	"testing"

	"stratum/internal/pgtest"
)

// A bbolt store copied into PostgreSQL reads the same: every key, the
// sequences, sealed values and the audit chain.
func TestCopyFileIntoPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	src := openerFor(filepath.Join(t.TempDir(), "stratum.db"))(t)
	err := src.Update(func(tx *Tx) error {
		for i := 0; i < 300; i++ {
			if _, err := cBucket.NextSequence(tx); err != nil {
				return err
			}
			if err := cBucket.Put(tx, string(rune('a'+i%26))+strings.Repeat("x", i%7), []byte{byte(i)}); err != nil {
				return err
			}
			if err := tx.Audit("copy.test", "t", "s", map[string]string{"i": string(rune('a' + i%26))}); err != nil {
				return err
			}
		}
		return cOther.PutSealed(tx, "secret", []byte("hunter2"))
	})
	if err != nil {
		t.Fatal(err)
	}
	dst := openerFor(dsn)(t)
	counts, err := Copy(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := src.Buckets()
	want, _ := src.CountKeys(names)
	got, _ := dst.CountKeys(names)
	for _, b := range names {
		if got[b] != want[b] || counts[b] != want[b] {
			t.Errorf("bucket %s: %d keys in the file, %d copied, %d in the database", b, want[b], counts[b], got[b])
		}
	}
	if n, err := dst.VerifyAudit(); n != 300 || err != nil {
		t.Fatalf("audit chain in the database: %d events, %v", n, err)
	}
	err = dst.Update(func(tx *Tx) error {
		if n, err := cBucket.NextSequence(tx); n != 301 || err != nil {
			t.Errorf("sequence after the copy = %d, %v; want 301", n, err)
		}
		if pt, _, err := cOther.GetSealed(tx, "secret"); string(pt) != "hunter2" || err != nil {
			t.Errorf("sealed value after the copy = %q, %v", pt, err)
		}
		return tx.Audit("after.copy", "t", "s", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := dst.VerifyAudit(); n != 301 || err != nil {
		t.Fatalf("audit chain after appending on the database: %d, %v", n, err)
	}
	if _, err := Copy(src, dst); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a second copy into the same database: %v", err)
	}
}
