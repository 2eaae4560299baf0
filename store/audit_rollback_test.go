package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"stratum/wire"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Attacker without data.key: edit event 2, relink the whole chain with plain
// SHA-256, set meta/schema back to 6. The next Open (founder start) re-runs
// keyAuditChain, which HMAC-relinks the forged chain and reseals the head.
func TestTrust07_SchemaRollbackDoesNotLaunderTampering(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	fill(t, db)
	if err := db.Update(func(tx *Tx) error { return declaredInTest.Put(tx, "k", map[string]int{"n": 1}) }); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, db, 4)
	db.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(AuditBucket.Name()))
		// relink from event 1 so seq 2 gets edited and all later links are plain sha256
		prevRaw := b.Get(seqKey(1))
		var ev wire.AuditEvent
		_ = json.Unmarshal(prevRaw, &ev)
		for s := uint64(2); ; s++ {
			v := b.Get(seqKey(s))
			if v == nil {
				break
			}
			var e wire.AuditEvent
			_ = json.Unmarshal(v, &e)
			if s == 2 {
				e.Kind = "nothing.happened"
			}
			sum := sha256.Sum256(prevRaw)
			e.Prev = hex.EncodeToString(sum[:])
			raw, _ := json.Marshal(e)
			if err := b.Put(seqKey(s), raw); err != nil {
				return err
			}
			prevRaw = raw
		}
		return tx.Bucket([]byte(metaBucket.Name())).Put([]byte("schema"), seqKey(6))
	})
	// The founder refuses to start (and so to sign the forged chain)...
	if db2, err := Open(path, testKey(t)); err == nil {
		db2.Close()
		t.Fatal("a store whose schema level was rolled back under a keyed chain opened")
	} else if !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("refused with %v, want it to say the schema level was rolled back", err)
	}
	// ...and verify does not call the chain intact.
	if n, err := VerifyAuditFile(path, testKey(t)); err == nil {
		t.Fatalf("tampered chain verifies as intact (%d events)", n)
	}
}
