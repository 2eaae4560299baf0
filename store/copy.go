package store

import (
	"errors"
	"fmt"
	"sort"
)

// Copying a whole store, for `stratum migrate` (a bbolt founder moved into
// an empty PostgreSQL database). Values are copied as stored: sealed ones
// stay sealed under the same data key and the same bucket/key binding, and
// the audit chain keeps its bytes, so its hashes still link.

// Counts is the number of keys in each non-empty bucket.
type Counts map[string]int

// Total is the number of keys in every bucket.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// sequencer is a backend transaction that can set a bucket's sequence.
type sequencer interface {
	setSequence(bucket string, n uint64) error
}

func (t boltTx) setSequence(bucket string, n uint64) error {
	b, err := t.bucketForWrite(bucket)
	if err != nil {
		return err
	}
	return b.SetSequence(n)
}

func (t pgTx) setSequence(bucket string, n uint64) error {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO stratum_seq (bucket, value) VALUES ($1, $2)
		ON CONFLICT (bucket) DO UPDATE SET value = EXCLUDED.value`, bucket, int64(n))
	return t.err(err)
}

// Copy copies every bucket, key and sequence of the store src into dst,
// in one transaction on dst, and answers what it copied (founder migrate:
// a bbolt file into PostgreSQL). dst must hold nothing but its schema
// version.
func Copy(src, dst *DB) (Counts, error) {
	if err := dst.mustBeEmpty(); err != nil {
		return nil, err
	}
	counts := Counts{}
	err := src.View(func(stx *Tx) error {
		names, ok := stx.kv.(listBuckets)
		if !ok {
			return errors.New("store: the source cannot list its buckets")
		}
		return dst.Update(func(dtx *Tx) error {
			seq, ok := dtx.kv.(sequencer)
			if !ok {
				return errors.New("store: the target cannot set sequences")
			}
			return names.buckets(func(bucket string, n uint64) error {
				if err := dtx.kv.createBucket(bucket); err != nil {
					return err
				}
				err := stx.kv.scan(bucket, nil, func(k, v []byte) (bool, error) {
					if v == nil {
						return false, fmt.Errorf("store: bucket %s holds a nested bucket %q; this store was not written by stratum", bucket, k)
					}
					counts[bucket]++
					return true, dtx.kv.put(bucket, k, v)
				})
				if err != nil {
					return err
				}
				if n > 0 {
					return seq.setSequence(bucket, n)
				}
				return nil
			})
		})
	})
	return counts, err
}

// CountKeys answers how many keys each of the named buckets holds.
func (db *DB) CountKeys(buckets []string) (Counts, error) {
	counts := Counts{}
	err := db.View(func(tx *Tx) error {
		for _, b := range buckets {
			if err := tx.kv.scan(b, nil, func(_, _ []byte) (bool, error) { counts[b]++; return true, nil }); err != nil {
				return err
			}
		}
		return nil
	})
	return counts, err
}

// mustBeEmpty refuses a target that holds anything but its schema: a
// migration never merges two founders.
func (db *DB) mustBeEmpty() error {
	var found string
	err := db.View(func(tx *Tx) error {
		names, ok := tx.kv.(listBuckets)
		if !ok {
			return errors.New("store: the target cannot list its buckets")
		}
		return names.buckets(func(name string, _ uint64) error {
			if name == metaBucket.Name() || found != "" {
				return nil
			}
			return tx.kv.scan(name, nil, func(_, _ []byte) (bool, error) { found = name; return false, nil })
		})
	})
	if err != nil {
		return err
	}
	if found != "" {
		return fmt.Errorf("store: %s is not empty (bucket %s holds data): migrate into an empty database", db.Where(), found)
	}
	return nil
}

// Buckets lists the buckets of the store, sorted.
func (db *DB) Buckets() ([]string, error) {
	var names []string
	err := db.View(func(tx *Tx) error {
		l, ok := tx.kv.(listBuckets)
		if !ok {
			return errors.New("store: the store cannot list its buckets")
		}
		return l.buckets(func(name string, _ uint64) error { names = append(names, name); return nil })
	})
	sort.Strings(names)
	return names, err
}
