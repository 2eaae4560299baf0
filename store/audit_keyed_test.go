package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"stratum/wire"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writeFirstBuildStore writes a store the way the first build did:
// schema 1 and an unkeyed SHA-256 chain of n events.
func writeFirstBuildStore(t *testing.T, path string, n int) {
	t.Helper()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists([]byte(metaBucket.Name()))
		if err != nil {
			return err
		}
		if err := meta.Put([]byte("schema"), seqKey(1)); err != nil {
			return err
		}
		b, err := tx.CreateBucketIfNotExists([]byte(AuditBucket.Name()))
		if err != nil {
			return err
		}
		items, err := tx.CreateBucketIfNotExists([]byte("items"))
		if err != nil {
			return err
		}
		if err := items.Put([]byte("k"), []byte(`{"v":1}`)); err != nil {
			return err
		}
		prev := make([]byte, sha256.Size)
		for i := 1; i <= n; i++ {
			ev := wire.AuditEvent{Seq: uint64(i), Time: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC), Kind: "old.event", Actor: "admin@stratum.local", Subject: fmt.Sprint(i), Prev: hex.EncodeToString(prev)}
			raw, _ := json.Marshal(ev)
			if _, err := b.NextSequence(); err != nil {
				return err
			}
			if err := b.Put(seqKey(uint64(i)), raw); err != nil {
				return err
			}
			sum := sha256.Sum256(raw)
			prev = sum[:]
		}
		return nil
	})
}

func TestTrust07_FirstBuildChainMigratedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stratum.db")
	writeFirstBuildStore(t, path, 4)
	if _, err := VerifyAuditFile(path, testKey(t)); err == nil || !strings.Contains(err.Error(), "predates keyed links") {
		t.Fatalf("verify before migration = %v, want 'predates keyed links'", err)
	}
	for round := 0; round < 2; round++ {
		db, err := Open(path, testKey(t))
		if err != nil {
			t.Fatal(err)
		}
		n, err := db.VerifyAudit()
		if err != nil || n != 5 {
			t.Fatalf("round %d: VerifyAudit = %d, %v; want 5 events (4 old + the marker)", round, n, err)
		}
		evs, _ := db.AuditEvents(0, 100)
		marker := evs[4]
		if marker.Kind != "audit.chain.keyed" || marker.Data["previousChain"] != "intact" || marker.Data["events"] != "4" {
			t.Errorf("marker event = %+v", marker)
		}
		if evs[0].Kind != "old.event" || evs[3].Subject != "4" {
			t.Errorf("old events changed beyond their links: %+v", evs[:4])
		}
		db.Close()
	}
	// The migration ran once: another key cannot verify the relinked chain.
	if _, err := VerifyAuditFile(path, otherKey(t)); err == nil {
		t.Fatal("the chain verifies under another data key")
	}
}

func TestTrust07_BrokenFirstBuildChainMarkedBroken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stratum.db")
	writeFirstBuildStore(t, path, 3)
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte(AuditBucket.Name())).Delete(seqKey(2)) })
	db, err := Open(path, testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, _ := db.AuditEvents(0, 100)
	last := evs[len(evs)-1]
	if last.Kind != "audit.chain.keyed" || !strings.HasPrefix(last.Data["previousChain"], "broken: audit chain skips from event 1 to 3") {
		t.Fatalf("marker = %+v, want the old chain's break recorded", last)
	}
}

// An attacker holding the file but not the data key.
func TestTrust07_AuditTamperWithoutTheKey(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(tx *bolt.Tx) error
		want   string
	}{
		{"remove the newest two events", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(AuditBucket.Name()))
			if err := b.Delete(seqKey(5)); err != nil {
				return err
			}
			return b.Delete(seqKey(4))
		}, "newest events were removed"},
		{"edit the newest event", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(AuditBucket.Name()))
			var ev wire.AuditEvent
			_ = json.Unmarshal(b.Get(seqKey(5)), &ev)
			ev.Actor = "nobody"
			raw, _ := json.Marshal(ev)
			return b.Put(seqKey(5), raw)
		}, "event 5 does not match the sealed head"},
		{"edit event 2 and recompute every later link as plain SHA-256", func(tx *bolt.Tx) error {
			return recomputeFrom(tx, 2, func(prev []byte) []byte { s := sha256.Sum256(prev); return s[:] })
		}, "event 3 does not chain to event 2"},
		{"edit event 2 and recompute the links with a guessed key", func(tx *bolt.Tx) error {
			return recomputeFrom(tx, 2, hmacLink([]byte("guessed")))
		}, "event 3 does not chain to event 2"},
		{"delete the audit bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(AuditBucket.Name())) }, "audit bucket is missing"},
		{"delete the bucket and the head", func(tx *bolt.Tx) error {
			if err := tx.Bucket([]byte(metaBucket.Name())).Delete([]byte(auditHeadKey)); err != nil {
				return err
			}
			_ = tx.DeleteBucket([]byte(AuditBucket.Name()))
			_, err := tx.CreateBucket([]byte(AuditBucket.Name()))
			return err
		}, "audit log and its sealed head are missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, path := openTemp(t, testKey(t))
			fill(t, db)
			if err := db.Update(func(tx *Tx) error { return declaredInTest.Put(tx, "k", map[string]int{"n": 1}) }); err != nil {
				t.Fatal(err)
			}
			appendEvents(t, db, 4)
			db.Close()
			if _, err := VerifyAuditFile(path, testKey(t)); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			rawUpdate(t, path, tc.tamper)
			_, err := VerifyAuditFile(path, testKey(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("VerifyAudit = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// recomputeFrom edits event seq and relinks every later event with link.
func recomputeFrom(tx *bolt.Tx, seq uint64, link func([]byte) []byte) error {
	b := tx.Bucket([]byte(AuditBucket.Name()))
	var prev []byte
	for k, v := b.Cursor().Seek(seqKey(seq)); k != nil; k, v = b.Cursor().Seek(seqKey(seq)) {
		var ev wire.AuditEvent
		if err := json.Unmarshal(v, &ev); err != nil {
			return err
		}
		if ev.Seq == 2 {
			ev.Kind = "nothing.happened"
		} else {
			ev.Prev = hex.EncodeToString(link(prev))
		}
		raw, _ := json.Marshal(ev)
		if err := b.Put(k, raw); err != nil {
			return err
		}
		prev = raw
		seq++
	}
	return nil
}

// auditBeforeKeying makes a step of schema 6 (the cluster's, which this
// test binary does not link: the test stands in for it) append an event.
var auditBeforeKeying bool

var _ = Provide(StepClusterAdmissionRelease, func(tx *Tx) error {
	if !auditBeforeKeying {
		return nil
	}
	return tx.Audit("test.earlier.migration", "stratum", "", nil)
})

// A migration before the keyed chain that audits links its event the
// first build's way, so the relinking finds the old chain intact and the
// marker follows it.
func TestTrust07_EarlierMigrationEventsRelinked(t *testing.T) {
	auditBeforeKeying = true
	defer func() { auditBeforeKeying = false }()
	path := filepath.Join(t.TempDir(), "stratum.db")
	writeFirstBuildStore(t, path, 2)
	db, err := Open(path, testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := db.VerifyAudit()
	if err != nil || n != 4 {
		t.Fatalf("VerifyAudit = %d, %v; want 4 events", n, err)
	}
	evs, _ := db.AuditEvents(0, 10)
	if evs[2].Kind != "test.earlier.migration" || evs[3].Kind != "audit.chain.keyed" || evs[3].Data["previousChain"] != "intact" || evs[3].Data["events"] != "3" {
		t.Fatalf("events %+v", evs)
	}
}
