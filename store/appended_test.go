package store

import (
	"bytes"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

var appendedTest = NewRawBucket("test-appended", Appended())

// TestAppendedPacksPages: keys appended in order fill an Appended
// bucket's pages (bbolt splits them 90% full, not in halves), so it takes
// far fewer leaf pages than the same records in a bucket that is not,
// and every record reads back.
func TestAppendedPacksPages(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	plain := Named("test-plain")
	const n = 2000
	for lo := 0; lo < n; lo += 20 {
		if err := db.Update(func(tx *Tx) error {
			for i := lo; i < lo+20; i++ {
				for _, b := range []RawBucket{appendedTest, plain} {
					if err := b.Put(tx, fmt.Sprintf("j-%08d", i), bytes.Repeat([]byte{byte(i)}, 200)); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	leaves := map[string]int{}
	err := db.be.(*boltBackend).db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{appendedTest.Name(), plain.Name()} {
			leaves[name] = tx.Bucket([]byte(name)).Stats().LeafPageN
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, p := leaves[appendedTest.Name()], leaves[plain.Name()]
	t.Logf("leaf pages: appended %d, plain %d", a, p)
	if a == 0 || float64(a) > 0.65*float64(p) {
		t.Errorf("the appended bucket takes %d leaf pages, the plain one %d: want well under two thirds", a, p)
	}
	if err := db.View(func(tx *Tx) error {
		for i := range n {
			if got := appendedTest.Get(tx, fmt.Sprintf("j-%08d", i)); len(got) != 200 || got[0] != byte(i) {
				return fmt.Errorf("record %d reads back %d bytes", i, len(got))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
