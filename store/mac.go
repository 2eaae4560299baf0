package store

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Authenticated records (SPEC 16.2). A record of a bucket declared
// Authenticated is stored as
//
//	recordMagic | HMAC-SHA256(key, bucket, key, format, payload) | payload
//
// under a key derived from the data key (as the audit chain's is), so a
// row inserted by anyone holding the database password, or edited in the
// bbolt file, fails its MAC and reads as absent: it grants nothing.

// recordMagic opens every authenticated record; its last byte is the
// record format (version 1). No JSON value, PEM block or decimal number
// starts with a NUL byte, so a record from before MACs is told apart.
var recordMagic = []byte{0, 's', 'm', 1}

const recordHeader = 4 + sha256.Size

// macPurpose names the record key among the data key's subkeys.
const macPurpose = "record mac v1"

var errRecordNeedsKey = errors.New("store: authenticated records need the data key; open the store with it")

// recordMAC binds payload to its bucket, key and record format.
func recordMAC(key *macKey, bucket, k string, payload []byte) []byte {
	m := key.hmacs.Get().(hash.Hash)
	defer key.hmacs.Put(m)
	m.Reset()
	head := make([]byte, 0, 4+len(bucket)+4+len(k)+len(recordMagic))
	head = binary.BigEndian.AppendUint32(head, uint32(len(bucket)))
	head = append(head, bucket...)
	head = binary.BigEndian.AppendUint32(head, uint32(len(k)))
	head = append(head, k...)
	m.Write(append(head, recordMagic...))
	m.Write(payload)
	return m.Sum(nil)
}

// macKey is the record key with HMACs keyed by it, used again: an HMAC's
// key setup (two SHA-256 blocks, half a dozen allocations) is made once
// per pooled HMAC instead of for every record read or written, a few a
// registration.
type macKey struct {
	hmacs sync.Pool
}

func newMACKey(key []byte) *macKey {
	k := &macKey{}
	k.hmacs.New = func() any { return hmac.New(sha256.New, key) }
	return k
}

// macs is what a DB keeps about record MACs.
type macs struct {
	once sync.Once
	key  *macKey
	err  error

	// legacy is set while migrations below recordMACSchema run: records
	// are then read and written without MACs, as the schema they run at.
	legacy atomic.Bool

	rejected atomic.Uint64

	// verified holds, for the records of Remembered buckets, bucket NUL
	// key -> a copy of the stored bytes whose MAC last verified.
	verifiedMu sync.Mutex
	verified   map[string][]byte

	mu       sync.Mutex
	reported map[string]bool // bucket/key/sum of each rejected record seen
	log      *slog.Logger
}

func (db *DB) recordKey() (*macKey, error) {
	db.macs.once.Do(func() {
		d, ok := db.sealer.(keyDeriver)
		if !ok {
			db.macs.err = errRecordNeedsKey
			return
		}
		key, err := d.DeriveKey(macPurpose)
		if err != nil {
			db.macs.err = err
			return
		}
		db.macs.key = newMACKey(key)
	})
	return db.macs.key, db.macs.err
}

// sealRecord returns payload as an authenticated record of bucket/key.
func (tx *Tx) sealRecord(bucket, key string, payload []byte) ([]byte, error) {
	if tx.db.macs.legacy.Load() {
		return payload, nil
	}
	mk, err := tx.db.recordKey()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, recordHeader+len(payload))
	out = append(out, recordMagic...)
	out = append(out, recordMAC(mk, bucket, key, payload)...)
	return append(out, payload...), nil
}

// checkRecord returns the payload of the stored record, or ok false when
// its MAC fails (or it has none).
func checkRecord(mk *macKey, bucket, key string, stored []byte) (payload []byte, ok bool) {
	if len(stored) < recordHeader || !bytes.Equal(stored[:len(recordMagic)], recordMagic) {
		return nil, false
	}
	payload = stored[recordHeader:]
	return payload, hmac.Equal(stored[len(recordMagic):recordHeader], recordMAC(mk, bucket, key, payload))
}

// openRecord returns the payload of an authenticated record, or nil (the
// record is absent) when its MAC fails; the failure is counted, logged and
// audited once.
func (tx *Tx) openRecord(bucket, key string, stored []byte) ([]byte, error) {
	if tx.db.macs.legacy.Load() {
		return stored, nil
	}
	mk, err := tx.db.recordKey()
	if err != nil {
		return nil, err
	}
	payload, ok := checkRecord(mk, bucket, key, stored)
	if ok {
		return payload, nil
	}
	tx.db.rejectRecord(bucket, key, stored)
	return nil, nil
}

// SetLogger names where rejected records are logged (the default logger
// otherwise).
func (db *DB) SetLogger(l *slog.Logger) {
	db.macs.mu.Lock()
	db.macs.log = l
	db.macs.mu.Unlock()
}

// RejectedRecords counts the reads of records whose MAC failed (each
// distinct record once per process): the metric of SPEC 16.2.
func (db *DB) RejectedRecords() uint64 { return db.macs.rejected.Load() }

// rejectRecord counts, logs and (in its own transaction, once per stored
// value) audits a record whose MAC fails.
func (db *DB) rejectRecord(bucket, key string, stored []byte) {
	sum := sha256.Sum256(stored)
	id := bucket + "/" + key + "/" + hex.EncodeToString(sum[:])
	db.macs.mu.Lock()
	if db.macs.reported == nil {
		db.macs.reported = map[string]bool{}
	}
	seen := db.macs.reported[id]
	db.macs.reported[id] = true
	log := db.macs.log
	db.macs.mu.Unlock()
	if seen {
		return
	}
	db.macs.rejected.Add(1)
	if log == nil {
		log = slog.Default()
	}
	log.Warn("store: a record fails its MAC and is treated as absent (written without the data key)", "bucket", bucket, "key", key)
	go db.auditRejected(bucket, key, sum[:])
}

// rejectedPrefix (meta) marks a rejected record already audited, so a
// restart does not audit it again. The mark is sealed: one written by
// whoever forged the record (who has no data key) does not silence it.
const rejectedPrefix = "rejected/"

func (db *DB) auditRejected(bucket, key string, sum []byte) {
	mark := rejectedPrefix + bucket + "/" + hex.EncodeToString([]byte(key))
	_ = db.Update(func(tx *Tx) error {
		if seen, found, err := metaBucket.GetSealed(tx, mark); err == nil && found && bytes.Equal(seen, sum) {
			return nil
		}
		if err := tx.Audit("store.record.rejected", "stratum", bucket+"/"+key, map[string]string{
			"bucket": bucket, "key": key, "why": "the record's MAC fails: it was written without the data key",
		}); err != nil {
			return err
		}
		return metaBucket.PutSealed(tx, mark, sum)
	})
}

// RejectedRecord names a record whose MAC fails.
type RejectedRecord struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

func (r RejectedRecord) String() string { return fmt.Sprintf("%s/%q", r.Bucket, r.Key) }

// AuthenticatedBuckets lists the buckets declared Authenticated, sorted.
func AuthenticatedBuckets() []string {
	registry.Lock()
	defer registry.Unlock()
	out := append([]string(nil), registry.authenticated...)
	sort.Strings(out)
	return out
}

// RejectedRecords walks every authenticated bucket and lists each record
// whose MAC fails (`stratum audit verify`).
func (db *DB) ListRejectedRecords() ([]RejectedRecord, error) {
	mk, err := db.recordKey()
	if err != nil {
		return nil, err
	}
	var out []RejectedRecord
	err = db.View(func(tx *Tx) error {
		if schemaOf(tx) < recordMACSchema {
			return nil
		}
		for _, name := range AuthenticatedBuckets() {
			err := tx.kv.scan(name, nil, func(k, v []byte) (bool, error) {
				if _, ok := checkRecord(mk, name, string(k), v); !ok {
					out = append(out, RejectedRecord{Bucket: name, Key: string(k)})
				}
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// recordsAuthenticatedKey (meta, sealed) marks a store whose records
// carry MACs.
const recordsAuthenticatedKey = "recordsAuthenticated"

// authenticateRecords is the migration that gives every existing record
// of an authenticated bucket its MAC, once.
func authenticateRecords(tx *Tx) error {
	mk, err := tx.db.recordKey()
	if err != nil {
		return err
	}
	// A store whose records were authenticated before (the sealed mark,
	// or a record already carrying a valid MAC) at a schema below this
	// one had its level rolled back to have forged rows signed: refuse.
	if metaBucket.Get(tx, recordsAuthenticatedKey) != nil {
		return errors.New("the store's records were already authenticated yet the schema level says they were not: the schema level was rolled back; restore from a backup")
	}
	type rec struct {
		k, v []byte
	}
	for _, name := range AuthenticatedBuckets() {
		var recs []rec
		err := tx.kv.scan(name, nil, func(k, v []byte) (bool, error) {
			if _, ok := checkRecord(mk, name, string(k), v); ok {
				return false, fmt.Errorf("record %s/%q already carries a MAC yet the schema level says records were not authenticated: the schema level was rolled back; restore from a backup", name, k)
			}
			recs = append(recs, rec{bytes.Clone(k), bytes.Clone(v)})
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			out := make([]byte, 0, recordHeader+len(r.v))
			out = append(out, recordMagic...)
			out = append(out, recordMAC(mk, name, string(r.k), r.v)...)
			if err := tx.kv.put(name, r.k, append(out, r.v...)); err != nil {
				return err
			}
		}
	}
	return metaBucket.PutSealed(tx, recordsAuthenticatedKey, []byte("1"))
}

// RecordPayload returns the payload of a stored authenticated record
// without checking its MAC (ok false when it carries none): for tests and
// tools that turn a store into one of a build before MACs.
func RecordPayload(stored []byte) (payload []byte, ok bool) {
	if len(stored) < recordHeader || !bytes.Equal(stored[:len(recordMagic)], recordMagic) {
		return stored, false
	}
	return stored[recordHeader:], true
}

// RejectedRecordsError names every stored record whose MAC fails: `audit
// verify` fails with it once the chain itself holds.
type RejectedRecordsError struct {
	Records []RejectedRecord
}

func (e *RejectedRecordsError) Error() string {
	names := make([]string, len(e.Records))
	for i, r := range e.Records {
		names[i] = r.String()
	}
	return fmt.Sprintf("%d stored record(s) fail their MAC (written without the data key; each is treated as absent): %s", len(e.Records), strings.Join(names, ", "))
}

// maxRemembered bounds the records whose verified bytes are remembered;
// a full memory simply starts over.
const maxRemembered = 4096

// recall returns the payload of the remembered copy of bucket/key when
// stored is byte for byte what verified last (nil otherwise, and always
// while MACs are off for migrations). The payload is the memory's own
// copy: valid after the transaction, never written.
func (m *macs) recall(bucket, key string, stored []byte) []byte {
	if m.legacy.Load() {
		return nil
	}
	m.verifiedMu.Lock()
	defer m.verifiedMu.Unlock()
	if kept, ok := m.verified[bucket+"\x00"+key]; ok && bytes.Equal(kept, stored) {
		return kept[recordHeader:len(kept):len(kept)]
	}
	return nil
}

// remember keeps a copy of stored, whose MAC just verified for bucket/key,
// and returns the copy's payload (as recall does; nil while MACs are off).
func (m *macs) remember(bucket, key string, stored []byte) []byte {
	if m.legacy.Load() || len(stored) < recordHeader {
		return nil
	}
	kept := bytes.Clone(stored)
	m.verifiedMu.Lock()
	defer m.verifiedMu.Unlock()
	if m.verified == nil || len(m.verified) >= maxRemembered {
		m.verified = map[string][]byte{}
	}
	m.verified[bucket+"\x00"+key] = kept
	return kept[recordHeader:len(kept):len(kept)]
}
