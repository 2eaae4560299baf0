package store

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// TestFreePagesFoundAgainOnOpen: the store does not write its free pages
// at each commit (NoFreelistSync), so an open finds them again. Records
// rewritten after a reopen go into the pages their earlier versions
// freed: the file does not grow, and every record reads back as written.
func TestFreePagesFoundAgainOnOpen(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	records := Named(declaredInTest.Name())
	const n = 200
	write := func(db *DB, round byte) {
		t.Helper()
		for lo := 0; lo < n; lo += 20 {
			if err := db.Update(func(tx *Tx) error {
				for i := lo; i < lo+20; i++ {
					if err := records.Put(tx, fmt.Sprintf("r-%04d", i), bytes.Repeat([]byte{round}, 6000)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	size := func() int64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	write(db, 1)
	write(db, 2) // frees the first round's pages
	db.Close()
	before := size()

	for round := byte(3); round < 6; round++ {
		db, err := Open(path, testKey(t))
		if err != nil {
			t.Fatal(err)
		}
		write(db, round)
		if err := db.View(func(tx *Tx) error {
			for i := range n {
				if got := records.Get(tx, fmt.Sprintf("r-%04d", i)); len(got) != 6000 || got[0] != round || got[5999] != round {
					return fmt.Errorf("round %d: record %d reads back %d bytes starting %v", round, i, len(got), got[:min(1, len(got))])
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	if after := size(); after > before {
		t.Fatalf("the file grew from %d to %d bytes over three rounds of rewrites after reopening: the free pages were not found again", before, after)
	}
}
