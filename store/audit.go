package store

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"stratum/wire"
	"strconv"
	"sync"
	"time"
)

// auditHeadKey (in the meta bucket, sealed under the data key) holds the
// newest event's sequence and link: removing the newest events, or the
// whole bucket, no longer leaves a chain that verifies.
const auditHeadKey = "auditHead"

type auditHead struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// keyDeriver is a Sealer that derives subkeys (the data key does).
type keyDeriver interface {
	DeriveKey(purpose string) ([]byte, error)
}

var errAuditNeedsKey = errors.New("store: the audit chain is keyed by the data key; open the store with it")

// auditKey is the chain's HMAC key, derived once per open store.
func (db *DB) auditKey() ([]byte, error) {
	db.auditKeyOnce.Do(func() {
		d, ok := db.sealer.(keyDeriver)
		if !ok {
			db.auditKeyErr = errAuditNeedsKey
			return
		}
		db.auditKeyVal, db.auditKeyErr = d.DeriveKey("audit chain v1")
	})
	return db.auditKeyVal, db.auditKeyErr
}

// hmacLink links with one HMAC, reset for each event: a walk of the
// chain or an appended event builds it once. The returned func is not
// safe for concurrent use.
func hmacLink(key []byte) func(prev []byte) []byte {
	m := hmac.New(sha256.New, key)
	return func(prev []byte) []byte {
		m.Reset()
		m.Write(prev)
		return m.Sum(nil)
	}
}

// lastAuditLink remembers the keyed link of the newest event appended in
// this process, by its bytes: the next event's prev is that link, and a
// group commit runs many audited calls one after the other, each in a Tx
// of its own, so each would hash the event before it again. A link is a
// function of the event's bytes alone (under the store's one key), so
// bytes that match are the same link whatever became of the transaction
// that wrote them.
type lastAuditLink struct {
	mu   sync.Mutex
	raw  []byte
	link string
}

// of is raw's remembered link, if raw is the event last remembered.
func (l *lastAuditLink) of(raw []byte) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.raw == nil || !bytes.Equal(l.raw, raw) {
		return "", false
	}
	return l.link, true
}

// remember keeps raw (which its writer no longer changes) and its link.
func (l *lastAuditLink) remember(raw []byte, link string) {
	l.mu.Lock()
	l.raw, l.link = raw, link
	l.mu.Unlock()
}

// sha256Link is the link of the first build's unkeyed chain.
func sha256Link(prev []byte) []byte {
	sum := sha256.Sum256(prev)
	return sum[:]
}

var genesis = make([]byte, sha256.Size)

func seqKey(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

// Audit appends an event to the chain inside tx and moves the sealed head.
func (tx *Tx) Audit(kind, actor, subject string, data map[string]string) error {
	// An event written by an earlier migration, before the chain is
	// keyed, links the first build's way; keyAuditChain relinks it.
	keyed := schemaOf(tx) >= keyedAuditSchema
	link := sha256Link
	if keyed {
		key, err := tx.db.auditKey()
		if err != nil {
			return err
		}
		link = hmacLink(key)
	}
	k, v, err := tx.kv.last(AuditBucket.Name())
	if err != nil {
		return err
	}
	var prev string
	switch {
	case k == nil:
		prev = hex.EncodeToString(genesis)
	case keyed && tx.auditHead != nil && bytes.Equal(k, seqKey(tx.auditHead.Seq)):
		// The last event is this transaction's own, whose link the head
		// already holds (a registration appends two events).
		prev = tx.auditHead.Hash
	default:
		if keyed {
			if l, ok := tx.db.lastLink.of(v); ok {
				prev = l
				break
			}
		}
		prev = hex.EncodeToString(link(v))
	}
	seq, err := tx.kv.nextSequence(AuditBucket.Name())
	if err != nil {
		return err
	}
	ev := wire.AuditEvent{Seq: seq, Time: time.Now().UTC(), Kind: kind, Actor: actor, Subject: subject, Data: data, Prev: prev}
	raw, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := tx.kvPut(AuditBucket.bucket(), seqKey(seq), raw); err != nil {
		return err
	}
	if !keyed {
		return nil
	}
	// The sealed head is written once, by sealAuditHead when fn returns,
	// for the transaction's last event: a registration appends two.
	tx.auditHead = &auditHead{Seq: seq, Hash: hex.EncodeToString(link(raw))}
	tx.db.lastLink.remember(raw, tx.auditHead.Hash)
	return nil
}

// sealAuditHead writes the sealed head of the last event tx appended (if
// any) and tells the OnAudit watcher of it at commit. DB.update calls it
// after fn and before the commit, so no transaction commits events
// without their head.
func (tx *Tx) sealAuditHead() error {
	h := tx.auditHead
	if h == nil {
		return nil
	}
	tx.auditHead = nil
	head, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := metaBucket.PutSealed(tx, auditHeadKey, head); err != nil {
		return err
	}
	if w := tx.db.auditWatch.Load(); w != nil {
		m := AuditMark{Seq: h.Seq, Head: h.Hash}
		tx.OnCommit(func() { (*w)(m) })
	}
	return nil
}

// AuditMark is where the keyed chain ends: the newest event's sequence
// and the hash its sealed head records.
type AuditMark struct {
	Seq  uint64 `json:"seq"`
	Head string `json:"head"`
}

// AuditMark reads the sealed head: the end of the chain as the store
// claims it (zero when nothing was audited yet).
func (db *DB) AuditMark() (AuditMark, error) {
	var m AuditMark
	err := db.View(func(tx *Tx) error {
		raw, found, err := metaBucket.GetSealed(tx, auditHeadKey)
		if err != nil || !found {
			return err
		}
		var head auditHead
		if err := json.Unmarshal(raw, &head); err != nil {
			return fmt.Errorf("the audit head does not decode: %w", err)
		}
		m = AuditMark{Seq: head.Seq, Head: head.Hash}
		return nil
	})
	return m, err
}

// OnAudit sets fn to hear, after each commit on this replica that
// appended audit events, the chain's new end (calls may come out of
// order from concurrent commits: keep the highest).
func (db *DB) OnAudit(fn func(AuditMark)) { db.auditWatch.Store(&fn) }

// AuditEvents returns events with seq > after, at most limit of them.
func (db *DB) AuditEvents(after uint64, limit int) ([]wire.AuditEvent, error) {
	var out []wire.AuditEvent
	if after == math.MaxUint64 {
		return out, nil
	}
	err := db.View(func(tx *Tx) error {
		return tx.kv.scan(AuditBucket.Name(), seqKey(after+1), func(k, v []byte) (bool, error) {
			if len(out) >= limit {
				return false, nil
			}
			var ev wire.AuditEvent
			if err := json.Unmarshal(v, &ev); err != nil {
				return false, fmt.Errorf("audit event %x: %w", k, err)
			}
			out = append(out, ev)
			return true, nil
		})
	})
	return out, err
}

// chainEnd is where a walk of the chain stopped.
type chainEnd struct {
	events  int
	lastSeq uint64
	last    []byte // the newest event's stored bytes
}

// walkChain checks every link of the chain in tx with link and reports
// the first break.
func walkChain(tx *Tx, link func(prev []byte) []byte) (chainEnd, error) {
	var end chainEnd
	prev := genesis
	err := tx.kv.scan(AuditBucket.Name(), nil, func(k, v []byte) (bool, error) {
		var ev wire.AuditEvent
		if err := json.Unmarshal(v, &ev); err != nil {
			return false, fmt.Errorf("audit event %d does not decode: %w", binary.BigEndian.Uint64(k), err)
		}
		if !bytes.Equal(k, seqKey(ev.Seq)) {
			return false, fmt.Errorf("audit event %d is stored under key %d", ev.Seq, binary.BigEndian.Uint64(k))
		}
		if ev.Seq != end.lastSeq+1 {
			return false, fmt.Errorf("audit chain skips from event %d to %d", end.lastSeq, ev.Seq)
		}
		if ev.Prev != hex.EncodeToString(prev) {
			return false, fmt.Errorf("audit event %d does not chain to event %d: the log was altered", ev.Seq, end.lastSeq)
		}
		prev = link(v)
		end.lastSeq, end.last = ev.Seq, append(end.last[:0], v...)
		end.events++
		return true, nil
	})
	return end, err
}

// VerifyAudit walks the whole chain with the data key and checks its end
// against the sealed head (VerifyAuditChain), then every authenticated
// record's MAC; it reports the first problem of the chain, or every
// record that fails (a *RejectedRecordsError).
func (db *DB) VerifyAudit() (events int, err error) {
	if events, err = db.VerifyAuditChain(); err != nil {
		return events, err
	}
	// The chain holds; every authenticated record must hold too (SPEC
	// 16.2): each one whose MAC fails is named.
	rejected, err := db.ListRejectedRecords()
	if err != nil {
		return events, err
	}
	if len(rejected) > 0 {
		return events, &RejectedRecordsError{Records: rejected}
	}
	return events, nil
}

// VerifyAuditChain walks the whole chain with the data key and checks its
// end against the sealed head: an event removed or edited anywhere in it
// is reported. A reader that concludes from the absence of an event must
// check it first.
func (db *DB) VerifyAuditChain() (events int, err error) {
	key, err := db.auditKey()
	if err != nil {
		return 0, err
	}
	err = db.View(func(tx *Tx) error {
		if v := schemaOf(tx); v < keyedAuditSchema {
			return fmt.Errorf("the audit chain predates keyed links (schema %d): start the founder once to migrate it", v)
		}
		end, err := walkChain(tx, hmacLink(key))
		events = end.events
		if err != nil {
			return err
		}
		raw, found, err := metaBucket.GetSealed(tx, auditHeadKey)
		if err != nil {
			return fmt.Errorf("the audit head: %w", err)
		}
		if !found {
			if end.events > 0 {
				return errors.New("the sealed audit head is missing: the log's end cannot be checked (was it removed?)")
			}
			if holdsData(tx) {
				return errors.New("the audit log and its sealed head are missing from an initialized store: the log was removed")
			}
			return nil // a store nothing was written to yet
		}
		var head auditHead
		if err := json.Unmarshal(raw, &head); err != nil {
			return fmt.Errorf("the audit head does not decode: %w", err)
		}
		if end.events == 0 {
			return fmt.Errorf("the audit head names event %d but the audit bucket is missing or empty: the log was removed", head.Seq)
		}
		if head.Seq != end.lastSeq {
			return fmt.Errorf("the audit head names event %d but the chain ends at event %d: the newest events were removed", head.Seq, end.lastSeq)
		}
		if head.Hash != hex.EncodeToString(hmacLink(key)(end.last)) {
			return fmt.Errorf("audit event %d does not match the sealed head: the log was altered", end.lastSeq)
		}
		return nil
	})
	return events, err
}

// holdsData reports whether any declared bucket but meta and audit has a
// key: the store was initialized, so its audit log cannot be empty.
func holdsData(tx *Tx) bool {
	for _, name := range DeclaredBuckets() {
		if name == metaBucket.Name() || name == AuditBucket.Name() {
			continue
		}
		found := false
		_ = tx.kv.scan(name, nil, func(_, _ []byte) (bool, error) { found = true; return false, nil })
		if found {
			return true
		}
	}
	return false
}

// VerifyAuditFile verifies the chain of a store no process holds, opened
// read-only, under the data key.
func VerifyAuditFile(path string, key Sealer) (int, error) {
	db, err := OpenReadOnly(path, key)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return db.VerifyAudit()
}

// keyAuditChain relinks an unkeyed (plain SHA-256) chain with HMAC links,
// once, and marks it with an event saying whether the old chain was
// intact. A store with no events has nothing to relink.
func keyAuditChain(tx *Tx) error {
	type kv struct{ k, v []byte }
	var events []kv
	err := tx.kv.scan(AuditBucket.Name(), nil, func(k, v []byte) (bool, error) {
		events = append(events, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
		return true, nil
	})
	if err != nil || len(events) == 0 {
		return err
	}
	// A store whose chain was keyed before has a sealed head and a marker
	// event: finding either at a schema below this one means the schema
	// level was rolled back to have a forged plain chain relinked (and so
	// laundered) with the key. Refuse to start rather than sign it.
	if metaBucket.Get(tx, auditHeadKey) != nil {
		return errors.New("the audit chain was already keyed (its sealed head exists) yet the schema level says it was not: the schema level was rolled back, and the chain may have been rewritten; restore from a backup")
	}
	for _, e := range events {
		var ev wire.AuditEvent
		if json.Unmarshal(e.v, &ev) == nil && ev.Kind == "audit.chain.keyed" {
			return errors.New("the audit chain was already keyed (it holds an audit.chain.keyed event) yet the schema level says it was not: the schema level was rolled back, and the chain may have been rewritten; restore from a backup")
		}
	}
	key, err := tx.db.auditKey()
	if err != nil {
		return err
	}
	old := "intact"
	end, err := walkChain(tx, sha256Link)
	if err != nil {
		old = "broken: " + err.Error()
	}
	link := hmacLink(key)
	prev := genesis
	for _, e := range events {
		var ev wire.AuditEvent
		if err := json.Unmarshal(e.v, &ev); err != nil {
			// An undecodable event stays as it is: verify names it.
			prev = link(e.v)
			continue
		}
		ev.Prev = hex.EncodeToString(prev)
		raw, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if err := tx.kv.put(AuditBucket.Name(), e.k, raw); err != nil {
			return err
		}
		prev = link(raw)
	}
	// The marker is the first keyed event: record the level now (migrate
	// records it again when this transaction commits).
	if err := metaBucket.Put(tx, schemaKey, seqKey(keyedAuditSchema)); err != nil {
		return err
	}
	return tx.Audit("audit.chain.keyed", "stratum", AuditBucket.Name(), map[string]string{
		"events": strconv.Itoa(len(events)), "previousChain": old, "previousIntactThrough": strconv.FormatUint(end.lastSeq, 10),
	})
}

// AuditReader reads the audit log for the API: pages of events and the
// chain's verdict.
type AuditReader struct{ DB *DB }

// Events returns up to limit events after sequence number after.
func (r AuditReader) Events(after uint64, limit int) ([]wire.AuditEvent, error) {
	return r.DB.AuditEvents(after, limit)
}

// Verify walks the whole chain and the authenticated records. A broken
// chain is a finding, not a failure: the error is only for a store that
// cannot be read (closed).
func (r AuditReader) Verify() (wire.AuditVerdict, error) {
	n, err := r.DB.VerifyAudit()
	if errors.Is(err, ErrClosed) {
		return wire.AuditVerdict{}, err
	}
	v := wire.AuditVerdict{Intact: err == nil, Events: n}
	if err != nil {
		v.Problem = err.Error()
	}
	return v, nil
}
