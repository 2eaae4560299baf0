package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
)

// Bucket[T] and RawBucket are the only way to a record: a domain declares
// its buckets in its schema.go (NewBucket, NewRawBucket) and reads and
// writes through them, so a bucket's name, what it holds and whether its
// records are authenticated (SPEC 16.2) are written once.

// Keyspace is a declared bucket, whatever its value type.
type Keyspace interface {
	Name() string
	// Has reports whether key holds a (valid) record.
	Has(tx *Tx, key string) bool
	// Keys calls fn with each key of a (valid) record, in order.
	Keys(tx *Tx, fn func(key string) error) error
	// Delete removes key; an absent key is not an error.
	Delete(tx *Tx, key string) error
	bucket() bucketSpec
}

// bucketSpec is what a declaration says about a bucket.
type bucketSpec struct {
	name string
	// authenticated records carry a MAC under a key derived from the data
	// key (see mac.go); a record whose MAC fails reads as absent.
	authenticated bool
	// remembered: the MAC check of a record read again unchanged is not
	// done again (Remembered).
	remembered bool
	// appended: new keys mostly sort after every stored one (Appended).
	appended bool
}

// Option qualifies a bucket declaration.
type Option func(*bucketSpec)

// Authenticated makes every record of the bucket carry a MAC bound to the
// bucket, the key and the record format (SPEC 16.2): a record written or
// edited by anyone without the data key reads as absent.
func Authenticated() Option { return func(s *bucketSpec) { s.authenticated = true } }

// Remembered, with Authenticated, makes the store remember per key the
// stored bytes whose MAC last verified: the same bytes read again are not
// checked again, since the check of the same bytes under the same bucket,
// key and data key gives the same answer. A large record read on every
// request (a release file's chunk index) then costs a comparison instead
// of an HMAC over it; any change to its bytes is checked as before. What
// a read of such a bucket returns is the store's own copy of the record:
// valid after the transaction, never written, the same slice for as long
// as the record is unchanged (a caller may compare it by identity).
func Remembered() Option { return func(s *bucketSpec) { s.remembered = true } }

// Appended says that new keys mostly sort after every key already stored
// (a sequence, a counter-led id): a page the bucket fills is split full,
// not in halves, as nothing will be inserted into it later. A commit that
// appends N records then writes about N/pageful pages, where half-full
// pages made it twice as many (etcd packs its revisions the same way).
func Appended() Option { return func(s *bucketSpec) { s.appended = true } }

// Bucket is a declared bucket whose values are JSON-encoded T.
type Bucket[T any] struct{ spec bucketSpec }

// NewBucket declares a bucket of JSON-encoded T.
func NewBucket[T any](name string, opts ...Option) Bucket[T] {
	return Bucket[T]{spec: declare(name, opts)}
}

// Name is the bucket's stored name.
func (b Bucket[T]) Name() string { return b.spec.name }

func (b Bucket[T]) bucket() bucketSpec { return b.spec }

// Get decodes the value at key; found is false when absent (or, in an
// authenticated bucket, when its MAC fails).
func (b Bucket[T]) Get(tx *Tx, key string) (v T, found bool, err error) {
	found, err = tx.getJSON(b.spec, key, &v)
	return v, found, err
}

// GetDecoded is Get remembering in d what it decoded: a record read
// again unchanged (the same bytes, their MAC checked as Get checks it) is
// not decoded again. What it returns may be shared with other readers:
// the caller must not modify it or anything it points to.
func (b Bucket[T]) GetDecoded(tx *Tx, key string, d *Decoded[T]) (v T, found bool, err error) {
	return getDecoded(tx, b.spec, key, d)
}

func getDecoded[T any](tx *Tx, spec bucketSpec, key string, d *Decoded[T]) (v T, found bool, err error) {
	stored, err := tx.kv.get(spec.name, []byte(key))
	if err != nil || stored == nil {
		return v, false, err
	}
	return d.decode(tx, spec, key, stored)
}

// decode is the value of stored, the bytes stored at key: remembered
// from the last time key held these very bytes, else opened (in an
// authenticated bucket, its MAC checked: found is false when it fails)
// and decoded now.
//
// Bytes remembered from a record whose MAC verified are not checked
// again (as Remembered's are not): the check of the same bytes under the
// same bucket, key and data key gives the same answer. Bytes read while
// MACs are off (migrations) are decoded again each time.
func (d *Decoded[T]) decode(tx *Tx, spec bucketSpec, key string, stored []byte) (v T, found bool, err error) {
	d.mu.Lock()
	kept, ok := d.m[key]
	d.mu.Unlock()
	if ok && kept.checked && kept.bucket == spec.name && bytes.Equal(kept.stored, stored) {
		return kept.v, true, nil
	}
	checked := tx.macChecked(spec)
	payload, err := tx.open(spec, key, stored)
	if err != nil || payload == nil {
		return v, false, err
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		return v, true, fmt.Errorf("store: decode %s/%s: %w", spec.name, key, err)
	}
	d.keep(spec.name, key, bytes.Clone(stored), checked, v)
	return v, true, nil
}

// keep remembers v as the value of the bytes stored at key; stored must
// not change afterwards.
func (d *Decoded[T]) keep(bucket, key string, stored []byte, checked bool, v T) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= maxDecoded {
		d.m = map[string]decodedValue[T]{}
	}
	d.m[key] = decodedValue[T]{bucket: bucket, stored: stored, checked: checked, v: v}
}

// PutDecoded is Put remembering in d that the bytes it stored hold v, as
// if GetDecoded had read them: a record written and read again (a join
// token a rack's registrations spend one after the other, in one commit)
// is not checked and decoded again. v must not be modified afterwards,
// nor anything it points to. If the transaction does not commit, d
// remembers bytes the store does not hold, which no read matches (Peek
// may answer them: it is a guard's hint, never an answer).
func (b Bucket[T]) PutDecoded(tx *Tx, key string, v T, d *Decoded[T]) error {
	stored, err := tx.storeJSON(b.spec, key, v)
	if err != nil {
		return err
	}
	// The backend keeps stored as it is until the commit, and so does d.
	d.keep(b.spec.name, key, stored, tx.macChecked(b.spec), v)
	return nil
}

// Decoded holds the values GetDecoded decoded, by key, with the stored
// bytes each came from (at most maxDecoded; then it starts again). The
// zero value is ready. One Decoded serves one store.
type Decoded[T any] struct {
	mu sync.Mutex
	m  map[string]decodedValue[T]
}

type decodedValue[T any] struct {
	bucket string
	stored []byte
	// checked: stored is what the store holds after its MAC verified (or
	// in a bucket without MACs), so the same bytes need no check again.
	checked bool
	v       T
}

const maxDecoded = 4096

// Peek is the value decoded the last time key was read with its MAC
// verified (or written by PutDecoded), without a transaction: what the
// store held then, which it may no longer hold (or never held, when the
// write's transaction failed). It is for a guard that lets a request on to a
// transaction that reads key again, never for an answer.
func (d *Decoded[T]) Peek(key string) (v T, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept, ok := d.m[key]
	if !ok || !kept.checked {
		return v, false
	}
	return kept.v, true
}

// GetRaw is the stored JSON at key, nil when absent (in an authenticated
// bucket, when its MAC fails): for a hot path that reads a record's
// leading field itself instead of scanning the whole record (GetPart's
// json.Unmarshal checks every byte of it first). Valid until the
// transaction ends; the caller must not modify it.
func (b Bucket[T]) GetRaw(tx *Tx, key string) ([]byte, error) { return tx.get(b.spec, key) }

// Has reports whether key holds a (valid) record.
func (b Bucket[T]) Has(tx *Tx, key string) bool { return tx.getRaw(b.spec, key) != nil }

// Put stores v at key: its JSON encoding, or the one it carries
// (Encoded).
func (b Bucket[T]) Put(tx *Tx, key string, v T) error { return tx.putJSON(b.spec, key, v) }

// Encoded is a value that carries its own JSON encoding, made before the
// transaction that stores it: a large record is encoded while other
// calls commit, not inside the commit they share. Put stores raw, when ok,
// instead of encoding the value: raw must be json.Marshal's encoding of
// it, and must not change until the commit (the store holds it).
type Encoded interface {
	EncodedJSON() (raw []byte, ok bool)
}

// Delete removes key; an absent key is not an error.
func (b Bucket[T]) Delete(tx *Tx, key string) error { return tx.delete(b.spec, key) }

// ForEach decodes each value in key order (skipping, in an authenticated
// bucket, records whose MAC fails).
func (b Bucket[T]) ForEach(tx *Tx, fn func(key string, v T) error) error {
	return tx.forEach(b.spec, func(key string, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("store: decode %s/%s: %w", b.spec.name, key, err)
		}
		return fn(key, v)
	})
}

// ForEachDecoded is ForEach remembering in d what it decoded, as
// GetDecoded does: a record read again unchanged is not decoded again.
// What fn is given may be shared with other readers: it must not modify
// it or anything it points to.
func (b Bucket[T]) ForEachDecoded(tx *Tx, d *Decoded[T], fn func(key string, v T) error) error {
	return tx.kv.scan(b.spec.name, nil, func(k, stored []byte) (bool, error) {
		key := string(k)
		v, found, err := d.decode(tx, b.spec, key, stored)
		if err != nil || !found {
			return err == nil, err
		}
		return true, fn(key, v)
	})
}

// Keys calls fn with each key in order, without decoding the values.
func (b Bucket[T]) Keys(tx *Tx, fn func(key string) error) error {
	return tx.forEach(b.spec, func(key string, _ []byte) error { return fn(key) })
}

// NextSequence returns a monotonically increasing number for the bucket.
func (b Bucket[T]) NextSequence(tx *Tx) (uint64, error) { return tx.kv.nextSequence(b.spec.name) }

// Sequence is the last number NextSequence returned (0 when none), read
// without moving it: in a View it says how far the bucket's writes had
// gone when the snapshot was taken.
func (b Bucket[T]) Sequence(tx *Tx) (uint64, error) { return tx.kv.sequence(b.spec.name) }

// RawBucket is a declared bucket of bytes: indexes of ids, sealed values,
// release content, values of mixed kinds under fixed keys.
type RawBucket struct{ spec bucketSpec }

// NewRawBucket declares a bucket of bytes.
func NewRawBucket(name string, opts ...Option) RawBucket {
	return RawBucket{spec: declare(name, opts)}
}

// Name is the bucket's stored name.
func (b RawBucket) Name() string { return b.spec.name }

func (b RawBucket) bucket() bucketSpec { return b.spec }

// Get returns the bytes at key (valid only inside tx), or nil. A backend
// failure fails the whole transaction.
func (b RawBucket) Get(tx *Tx, key string) []byte { return tx.getRaw(b.spec, key) }

// Has reports whether key holds a (valid) record.
func (b RawBucket) Has(tx *Tx, key string) bool { return tx.getRaw(b.spec, key) != nil }

// Occupied reports whether anything is stored at key, its MAC unchecked
// (no data key needed): for a refusal to overwrite, never for a grant.
func (b RawBucket) Occupied(tx *Tx, key string) bool { return b.Stored(tx, key) != nil }

// Stored is what is stored at key, MAC and all, unchecked (no data key
// needed), or nil: to tell whether a record changed between two reads of
// one transaction, never what it says. Valid until the transaction ends.
func (b RawBucket) Stored(tx *Tx, key string) []byte {
	raw, err := tx.kv.get(b.spec.name, []byte(key))
	if err != nil {
		tx.fail(err)
	}
	return raw
}

// Put stores raw at key.
func (b RawBucket) Put(tx *Tx, key string, raw []byte) error { return tx.putRaw(b.spec, key, raw) }

// Delete removes key; an absent key is not an error.
func (b RawBucket) Delete(tx *Tx, key string) error { return tx.delete(b.spec, key) }

// DeletePrefix removes every key that starts with prefix, without reading
// the values (release content, say, is large).
func (b RawBucket) DeletePrefix(tx *Tx, prefix string) error {
	return tx.kv.delPrefix(b.spec.name, []byte(prefix))
}

// ForEach calls fn for each key in order with its bytes (valid only
// during the call).
func (b RawBucket) ForEach(tx *Tx, fn func(key string, raw []byte) error) error {
	return tx.forEach(b.spec, fn)
}

// Keys calls fn with each key in order.
func (b RawBucket) Keys(tx *Tx, fn func(key string) error) error {
	return tx.forEach(b.spec, func(key string, _ []byte) error { return fn(key) })
}

// NextSequence returns a monotonically increasing number for the bucket.
func (b RawBucket) NextSequence(tx *Tx) (uint64, error) { return tx.kv.nextSequence(b.spec.name) }

// Sequence is the last number NextSequence returned (0 when none).
func (b RawBucket) Sequence(tx *Tx) (uint64, error) { return tx.kv.sequence(b.spec.name) }

// PutSealed seals plaintext under the data key and stores it at key. The
// bucket and key are bound as additional data, so a sealed value moved
// elsewhere in the store does not open.
func (b RawBucket) PutSealed(tx *Tx, key string, plaintext []byte) error {
	return tx.putSealed(b.spec, key, plaintext)
}

// GetSealed opens the sealed value at key.
func (b RawBucket) GetSealed(tx *Tx, key string) ([]byte, bool, error) {
	return tx.getSealed(b.spec, key)
}

// Field is one JSON-encoded value of type T under a fixed key of a raw
// bucket (the cluster's identity beside its CA certificate).
type Field[T any] struct {
	b   RawBucket
	key string
}

// NewField names the value at key of b.
func NewField[T any](b RawBucket, key string) Field[T] { return Field[T]{b: b, key: key} }

// Get decodes the value; found is false when absent.
func (f Field[T]) Get(tx *Tx) (v T, found bool, err error) {
	found, err = tx.getJSON(f.b.spec, f.key, &v)
	return v, found, err
}

// GetDecoded is Get remembering in d what it decoded, as
// Bucket.GetDecoded: what it returns may be shared with other readers.
func (f Field[T]) GetDecoded(tx *Tx, d *Decoded[T]) (v T, found bool, err error) {
	return getDecoded(tx, f.b.spec, f.key, d)
}

// Put stores v.
func (f Field[T]) Put(tx *Tx, v T) error { return tx.putJSON(f.b.spec, f.key, v) }

// GetPart decodes only the fields of P from the record of b at key: a
// hot path that needs one field of a large record does not decode it all.
func GetPart[P, T any](tx *Tx, b Bucket[T], key string) (p P, found bool, err error) {
	found, err = tx.getJSON(b.spec, key, &p)
	return p, found, err
}
