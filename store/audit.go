package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// AuditEvent is one state change. Data never holds a secret.
type AuditEvent struct {
	Seq     uint64            `json:"seq"`
	Time    time.Time         `json:"time"`
	Kind    string            `json:"kind"`
	Actor   string            `json:"actor,omitempty"`
	Subject string            `json:"subject,omitempty"`
	Data    map[string]string `json:"data,omitempty"`
	// Prev is the SHA-256 of the previous event's stored bytes, so editing
	// or removing any event breaks every link after it.
	Prev string `json:"prev"`
}

func seqKey(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

// Audit appends an event to the chain inside tx.
func (tx *Tx) Audit(kind, actor, subject string, data map[string]string) error {
	prev := make([]byte, sha256.Size)
	k, v, err := tx.kv.last(AuditBucket.Name())
	if err != nil {
		return err
	}
	if k != nil {
		sum := sha256.Sum256(v)
		prev = sum[:]
	}
	seq, err := tx.kv.nextSequence(AuditBucket.Name())
	if err != nil {
		return err
	}
	ev := AuditEvent{Seq: seq, Time: time.Now().UTC(), Kind: kind, Actor: actor, Subject: subject, Data: data, Prev: hex.EncodeToString(prev)}
	raw, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return tx.kv.put(AuditBucket.Name(), seqKey(seq), raw)
}

// AuditEvents returns events with seq > after, at most limit of them.
func (db *DB) AuditEvents(after uint64, limit int) ([]AuditEvent, error) {
	var out []AuditEvent
	if after == math.MaxUint64 {
		return out, nil
	}
	err := db.View(func(tx *Tx) error {
		return tx.kv.scan(AuditBucket.Name(), seqKey(after+1), func(k, v []byte) (bool, error) {
			if len(out) >= limit {
				return false, nil
			}
			var ev AuditEvent
			if err := json.Unmarshal(v, &ev); err != nil {
				return false, fmt.Errorf("audit event %x: %w", k, err)
			}
			out = append(out, ev)
			return true, nil
		})
	})
	return out, err
}

// VerifyAudit walks the whole chain and reports the first broken link.
func (db *DB) VerifyAudit() (events int, err error) {
	err = db.View(func(tx *Tx) error {
		prev := make([]byte, sha256.Size)
		var lastSeq uint64
		return tx.kv.scan(AuditBucket.Name(), nil, func(k, v []byte) (bool, error) {
			var ev AuditEvent
			if err := json.Unmarshal(v, &ev); err != nil {
				return false, fmt.Errorf("audit event %d does not decode: %w", binary.BigEndian.Uint64(k), err)
			}
			if !bytes.Equal(k, seqKey(ev.Seq)) {
				return false, fmt.Errorf("audit event %d is stored under key %d", ev.Seq, binary.BigEndian.Uint64(k))
			}
			if ev.Seq != lastSeq+1 {
				return false, fmt.Errorf("audit chain skips from event %d to %d", lastSeq, ev.Seq)
			}
			if ev.Prev != hex.EncodeToString(prev) {
				return false, fmt.Errorf("audit event %d does not chain to event %d: the log was altered", ev.Seq, lastSeq)
			}
			sum := sha256.Sum256(v)
			prev = sum[:]
			lastSeq = ev.Seq
			events++
			return true, nil
		})
	})
	return events, err
}
