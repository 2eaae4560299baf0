package stratumtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"stratum/store"
)

// RelinkAuditPlain rewrites a bbolt store's audit chain the first build's
// way, with no sealed head: each prev is the plain SHA-256 of the previous
// event's bytes. edit, when set, changes each event first. Tests that
// turn a data directory into one of the first build (or forge a chain
// without the data key) share it.
func RelinkAuditPlain(tx *bolt.Tx, edit func(ev map[string]any)) error {
	if err := tx.Bucket([]byte("meta")).Delete([]byte("auditHead")); err != nil {
		return err
	}
	b := tx.Bucket([]byte("audit"))
	prev := make([]byte, sha256.Size)
	var keys [][]byte
	_ = b.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
	for _, k := range keys {
		var ev map[string]any
		if err := json.Unmarshal(b.Get(k), &ev); err != nil {
			return err
		}
		if edit != nil {
			edit(ev)
		}
		ev["prev"] = hex.EncodeToString(prev)
		raw, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if err := b.Put(k, raw); err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		prev = sum[:]
	}
	return nil
}

// StripRecordMACs rewrites a bbolt store's records as a build before
// authenticated records (SPEC 16.2) wrote them: every MAC removed, the
// sealed mark of authenticated records gone. Call it with the schema
// level set below the MAC migration, which then adds them again.
func StripRecordMACs(tx *bolt.Tx) error {
	if err := tx.Bucket([]byte("meta")).Delete([]byte("recordsAuthenticated")); err != nil {
		return err
	}
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		type kv struct{ k, v []byte }
		var plain []kv
		_ = b.ForEach(func(k, v []byte) error {
			if p, ok := store.RecordPayload(v); ok {
				plain = append(plain, kv{append([]byte(nil), k...), append([]byte(nil), p...)})
			}
			return nil
		})
		for _, e := range plain {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	})
}

// ForgetAuditHWM removes dir/audit.hwm, as a data directory of a build
// before the audit high-water mark (SPEC 16.3) has none: the mark records
// the schema level the store was run at, and a founder refuses a store
// found below it.
func ForgetAuditHWM(dir string) error {
	if err := os.Remove(filepath.Join(dir, "audit.hwm")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
