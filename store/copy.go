package store

import (
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
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

// CopyFile copies every bucket, key and sequence of the bbolt store src
// into dst, in one transaction on dst, and answers what it copied. dst
// must hold nothing but its schema version.
func CopyFile(src, dst *DB) (Counts, error) {
	if _, ok := src.be.(*boltBackend); !ok {
		return nil, errors.New("store: migrate copies from a bbolt file")
	}
	if err := dst.mustBeEmpty(); err != nil {
		return nil, err
	}
	counts := Counts{}
	err := src.View(func(stx *Tx) error {
		btx := boltOf(stx)
		return dst.Update(func(dtx *Tx) error {
			seq, ok := dtx.kv.(sequencer)
			if !ok {
				return errors.New("store: the target cannot set sequences")
			}
			return btx.ForEach(func(name []byte, b *bolt.Bucket) error {
				bucket := string(name)
				if err := dtx.kv.createBucket(bucket); err != nil {
					return err
				}
				if err := b.ForEach(func(k, v []byte) error {
					if v == nil {
						return fmt.Errorf("store: bucket %s holds a nested bucket %q; this store was not written by stratum", bucket, k)
					}
					counts[bucket]++
					return dtx.kv.put(bucket, k, v)
				}); err != nil {
					return err
				}
				if n := b.Sequence(); n > 0 {
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
		if p, ok := tx.kv.(pgTx); ok {
			var bucket string
			err := p.tx.QueryRow(p.ctx, "SELECT bucket FROM stratum_kv WHERE bucket <> $1 LIMIT 1", metaBucket.Name()).Scan(&bucket)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = bucket
			return p.err(err)
		}
		for _, name := range DeclaredBuckets() {
			_ = tx.kv.scan(name, nil, func(_, _ []byte) (bool, error) { found = name; return false, nil })
		}
		return nil
	})
	if err != nil {
		return err
	}
	if found != "" {
		return fmt.Errorf("store: %s is not empty (bucket %s holds data): migrate into an empty database", db.Where(), found)
	}
	return nil
}

// Buckets lists the buckets of a bbolt store, sorted.
func (db *DB) Buckets() ([]string, error) {
	var names []string
	err := db.View(func(tx *Tx) error {
		btx := boltOf(tx)
		if btx == nil {
			return errors.New("store: only a bbolt file lists its buckets")
		}
		return btx.ForEach(func(name []byte, _ *bolt.Bucket) error { names = append(names, string(name)); return nil })
	})
	sort.Strings(names)
	return names, err
}
