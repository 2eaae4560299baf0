package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"stratum/wire"
	"strings"
	"testing"
	"time"
)

var (
	authTest    = NewBucket[map[string]string]("test-auth", Authenticated())
	fieldTest   = NewField[map[string]string](NewRawBucket("test-field", Authenticated()), "f")
	authTestRaw = NewRawBucket("test-auth-raw", Authenticated())
	authTestMem = NewRawBucket("test-auth-remembered", Authenticated(), Remembered())
)

// waitAudit waits for the events of kind (the rejection is audited in its
// own transaction, after the read).
func waitAudit(t *testing.T, db *DB, kind string, want int) []wire.AuditEvent {
	t.Helper()
	var got []wire.AuditEvent
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		evs, err := db.AuditEvents(0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range evs {
			if e.Kind == kind {
				got = append(got, e)
			}
		}
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
	}
}

// SPEC 16.2: a record written without the data key (a row inserted with
// the database password, or bytes put in the bbolt file), or a valid
// record moved to another key or bucket, reads as absent; it is counted,
// audited once and listed by ListRejectedRecords.
func TestContractAuthenticatedRecords(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		if err := db.Update(func(tx *Tx) error {
			if err := authTest.Put(tx, "good", map[string]string{"who": "admin"}); err != nil {
				return err
			}
			if err := authTestRaw.Put(tx, "turn", []byte("j-1")); err != nil {
				return err
			}
			// The forgeries: plain JSON, a valid record copied to another
			// key, and one copied to another authenticated bucket.
			if err := Named(authTest.Name()).Put(tx, "forged", []byte(`{"who":"intruder"}`)); err != nil {
				return err
			}
			good := bytes.Clone(Named(authTest.Name()).Get(tx, "good"))
			if bytes.Contains(good, []byte("admin")) && bytes.HasPrefix(good, []byte(`{`)) {
				t.Errorf("stored record %q carries no MAC", good)
			}
			if err := Named(authTest.Name()).Put(tx, "moved", good); err != nil {
				return err
			}
			return Named(authTestRaw.Name()).Put(tx, "good", good)
		}); err != nil {
			t.Fatal(err)
		}
		for range 3 { // read again and again: counted and audited once
			if err := db.View(func(tx *Tx) error {
				if v, found, err := authTest.Get(tx, "good"); err != nil || !found || v["who"] != "admin" {
					t.Errorf("good record: %v %v %v", v, found, err)
				}
				for _, k := range []string{"forged", "moved"} {
					if v, found, err := authTest.Get(tx, k); err != nil || found || authTest.Has(tx, k) {
						t.Errorf("%s record read as %v %v %v", k, v, found, err)
					}
				}
				if v := authTestRaw.Get(tx, "good"); v != nil {
					t.Errorf("a record moved from another bucket reads %q", v)
				}
				if v := string(authTestRaw.Get(tx, "turn")); v != "j-1" {
					t.Errorf("raw authenticated record reads %q", v)
				}
				var keys []string
				err := authTest.ForEach(tx, func(k string, _ map[string]string) error { keys = append(keys, k); return nil })
				if err != nil || strings.Join(keys, ",") != "good" {
					t.Errorf("ForEach visits %v (%v), want only good", keys, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if n := db.RejectedRecords(); n != 3 {
			t.Errorf("RejectedRecords() = %d, want 3", n)
		}
		if evs := waitAudit(t, db, "store.record.rejected", 3); len(evs) != 3 {
			t.Fatalf("%d rejection events, want 3: %+v", len(evs), evs)
		}
		list, err := db.ListRejectedRecords()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range list {
			names = append(names, r.Bucket+"/"+r.Key)
		}
		if got := strings.Join(names, ","); got != "test-auth/forged,test-auth/moved,test-auth-raw/good" {
			t.Fatalf("ListRejectedRecords() = %s", got)
		}
		var rej *RejectedRecordsError
		if _, err := db.VerifyAudit(); !errors.As(err, &rej) || len(rej.Records) != 3 || !strings.Contains(err.Error(), `test-auth/"forged"`) {
			t.Fatalf("VerifyAudit = %v, want the chain intact and the 3 records named", err)
		}
		// A second handle (a restart, a replica) audits nothing again.
		db.Close()
		db2 := open(t)
		_ = db2.View(func(tx *Tx) error { _, _, _ = authTest.Get(tx, "forged"); return nil })
		time.Sleep(300 * time.Millisecond) // time for a second audit, were there one
		if evs := waitAudit(t, db2, "store.record.rejected", 3); len(evs) != 3 {
			t.Fatalf("after reopen %d rejection events, want still 3", len(evs))
		}
	})
}

// SPEC 16.2 with Remembered: a record read again unchanged skips its MAC
// check, but a forgery written over it, or its verified bytes moved to
// another key, still read as absent, and a record changed by a writer
// with the key reads as changed.
func TestContractRememberedRecords(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		read := func(k string) string {
			var v string
			_ = db.View(func(tx *Tx) error { v = string(authTestMem.Get(tx, k)); return nil })
			return v
		}
		put := func(fn func(tx *Tx) error) {
			t.Helper()
			if err := db.Update(fn); err != nil {
				t.Fatal(err)
			}
		}
		put(func(tx *Tx) error { return authTestMem.Put(tx, "index", []byte("v1")) })
		var genuine []byte
		_ = db.View(func(tx *Tx) error { genuine = bytes.Clone(Named(authTestMem.Name()).Get(tx, "index")); return nil })
		for range 2 {
			if v := read("index"); v != "v1" {
				t.Fatalf("remembered record reads %q", v)
			}
		}
		// Forged in place (no key): absent, though the key was remembered.
		put(func(tx *Tx) error {
			forged := bytes.Clone(genuine)
			forged[len(forged)-1] = '9'
			return Named(authTestMem.Name()).Put(tx, "index", forged)
		})
		if v := read("index"); v != "" {
			t.Fatalf("a forgery over a remembered record reads %q", v)
		}
		// The verified bytes moved to another key: absent.
		put(func(tx *Tx) error { return Named(authTestMem.Name()).Put(tx, "moved", genuine) })
		if v := read("moved"); v != "" {
			t.Fatalf("remembered bytes moved to another key read %q", v)
		}
		// Put back, and rewritten with the key: read as they are.
		put(func(tx *Tx) error { return Named(authTestMem.Name()).Put(tx, "index", genuine) })
		if v := read("index"); v != "v1" {
			t.Fatalf("the genuine bytes put back read %q", v)
		}
		put(func(tx *Tx) error { return authTestMem.Put(tx, "index", []byte("v2")) })
		if v := read("index"); v != "v2" {
			t.Fatalf("a changed record reads %q", v)
		}
		// What a read returns is the store's own copy, the same slice while
		// the record is unchanged, usable after the transaction.
		var first, again []byte
		_ = db.View(func(tx *Tx) error { first = authTestMem.Get(tx, "index"); return nil })
		_ = db.View(func(tx *Tx) error { again = authTestMem.Get(tx, "index"); return nil })
		if string(first) != "v2" || &first[0] != &again[0] {
			t.Fatalf("two reads of an unchanged remembered record: %q and %q, not one copy", first, again)
		}
		if n := db.RejectedRecords(); n != 2 {
			t.Errorf("RejectedRecords() = %d, want 2 (the forgery, the moved copy)", n)
		}
	})
}

// The MAC migration gives the records of a store written before MACs
// their MAC once; a store whose level was set back below it after that
// is refused (its forged rows would be signed).
func TestContractRecordMACMigration(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		setLevel := func(tx *Tx, v uint64) error {
			var buf [8]byte
			binary.BigEndian.PutUint64(buf[:], v)
			return metaBucket.Put(tx, schemaKey, buf[:])
		}
		// As a build before MACs left it: plain records, level 8.
		if err := db.Update(func(tx *Tx) error {
			if err := Named(authTest.Name()).Put(tx, "old", []byte(`{"who":"admin"}`)); err != nil {
				return err
			}
			if err := metaBucket.Delete(tx, recordsAuthenticatedKey); err != nil {
				return err
			}
			return setLevel(tx, recordMACSchema-1)
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		db = open(t)
		if err := db.View(func(tx *Tx) error {
			if v, found, err := authTest.Get(tx, "old"); err != nil || !found || v["who"] != "admin" {
				t.Errorf("migrated record: %v %v %v", v, found, err)
			}
			if _, ok := RecordPayload(Named(authTest.Name()).Get(tx, "old")); !ok {
				t.Error("the migrated record carries no MAC")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if list, err := db.ListRejectedRecords(); err != nil || len(list) != 0 {
			t.Fatalf("after migration: rejected %v, %v", list, err)
		}
		// The level set back with a plain row added: refused, not signed.
		if err := db.Update(func(tx *Tx) error {
			if err := Named(authTest.Name()).Put(tx, "forged", []byte(`{"who":"intruder"}`)); err != nil {
				return err
			}
			return setLevel(tx, recordMACSchema-1)
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if db3, err := Open(target, contractKey(t)); err == nil {
			db3.Close()
			t.Fatal("a store whose level was set back below the MAC migration opened")
		} else if !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("refused with %v", err)
		}
	})
}

// TestPutEncodedIsPut: a value carrying its own encoding (Encoded) is
// stored as those bytes, MAC and all, and reads back as Put's; one that
// carries none is encoded as any other.
func TestPutEncodedIsPut(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		v := encodedTest{Who: "admin", HTML: "<&>"}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		carried := v
		carried.raw = raw
		if err := db.Update(func(tx *Tx) error {
			if err := encodedBucket.Put(tx, "put", v); err != nil {
				return err
			}
			return encodedBucket.Put(tx, "carried", carried)
		}); err != nil {
			t.Fatal(err)
		}
		_ = db.View(func(tx *Tx) error {
			got, found, err := encodedBucket.Get(tx, "carried")
			if err != nil || !found || got.Who != "admin" || got.HTML != "<&>" {
				t.Errorf("Get of a value that carried its encoding = %+v %v %v", got, found, err)
			}
			put := Named(encodedBucket.Name()).Get(tx, "put")
			carriedRaw := Named(encodedBucket.Name()).Get(tx, "carried")
			// The MAC binds the key, so the stored bytes differ in their
			// MAC only: the same length, the same JSON.
			if len(put) != len(carriedRaw) || !bytes.Contains(carriedRaw, raw) || !bytes.Contains(put, raw) {
				t.Errorf("stored bytes: Put %q, carried %q", put, carriedRaw)
			}
			return nil
		})
		// The carried bytes are what is stored, not an encoding of the value.
		odd := encodedTest{Who: "admin", raw: []byte(`{"who":"someone else","html":""}`)}
		if err := db.Update(func(tx *Tx) error { return encodedBucket.Put(tx, "odd", odd) }); err != nil {
			t.Fatal(err)
		}
		_ = db.View(func(tx *Tx) error {
			if got, _, _ := encodedBucket.Get(tx, "odd"); got.Who != "someone else" {
				t.Errorf("the carried encoding was not what was stored: %+v", got)
			}
			return nil
		})
	})
}

// encodedTest carries its encoding in raw when set (store.Encoded).
type encodedTest struct {
	Who  string `json:"who"`
	HTML string `json:"html"`
	raw  []byte
}

func (e encodedTest) EncodedJSON() ([]byte, bool) { return e.raw, e.raw != nil }

var encodedBucket = NewBucket[encodedTest]("test-encoded", Authenticated())

// GetDecoded answers what Get answers: the value decoded before while
// the record's bytes are unchanged, the new one once they change, and
// absent once they fail their MAC (a record forged over a decoded one).
// TestFieldGetDecodedIsGet: a field read through Decoded answers what
// Get answers, after each change too, and a forged value not at all.
func TestFieldGetDecodedIsGet(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		var d Decoded[map[string]string]
		put := func(v map[string]string) {
			t.Helper()
			if err := db.Update(func(tx *Tx) error { return fieldTest.Put(tx, v) }); err != nil {
				t.Fatal(err)
			}
		}
		get := func() (map[string]string, bool) {
			t.Helper()
			var v map[string]string
			var found bool
			if err := db.View(func(tx *Tx) error {
				var err error
				v, found, err = fieldTest.GetDecoded(tx, &d)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return v, found
		}
		if _, found := get(); found {
			t.Fatal("an absent field was found")
		}
		put(map[string]string{"vip": "10.0.0.1"})
		for range 2 {
			if v, found := get(); !found || v["vip"] != "10.0.0.1" {
				t.Fatalf("GetDecoded = %v %v", v, found)
			}
		}
		put(map[string]string{"vip": "10.0.0.2"})
		if v, found := get(); !found || v["vip"] != "10.0.0.2" {
			t.Fatalf("after a change GetDecoded = %v %v", v, found)
		}
		if err := db.Update(func(tx *Tx) error {
			return Named("test-field").Put(tx, "f", []byte(`{"vip":"10.9.9.9"}`))
		}); err != nil {
			t.Fatal(err)
		}
		if v, found := get(); found {
			t.Fatalf("a forged field read as %v", v)
		}
	})
}

func TestGetDecodedIsGet(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		var d Decoded[map[string]string]
		put := func(v map[string]string) {
			t.Helper()
			if err := db.Update(func(tx *Tx) error { return authTest.Put(tx, "k", v) }); err != nil {
				t.Fatal(err)
			}
		}
		get := func() (map[string]string, bool) { t.Helper(); return getDecodedK(t, db, &d) }
		put(map[string]string{"who": "admin"})
		for range 2 {
			if v, found := get(); !found || v["who"] != "admin" {
				t.Fatalf("GetDecoded = %v %v", v, found)
			}
		}
		put(map[string]string{"who": "operator"})
		if v, found := get(); !found || v["who"] != "operator" {
			t.Fatalf("after a change GetDecoded = %v %v", v, found)
		}
		forgeK(t, db)
		if v, found := get(); found {
			t.Fatalf("a forged record read as %v", v)
		}
	})
}

// TestForEachDecodedIsForEach: a walk through Decoded answers what
// ForEach answers, after a change too, and skips a record forged over a
// decoded one.
func TestForEachDecodedIsForEach(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		var d Decoded[encodedTest]
		put := func(key, who string) {
			t.Helper()
			if err := db.Update(func(tx *Tx) error { return encodedBucket.Put(tx, key, encodedTest{Who: who}) }); err != nil {
				t.Fatal(err)
			}
		}
		walk := func() map[string]string {
			t.Helper()
			got := map[string]string{}
			if err := db.View(func(tx *Tx) error {
				return encodedBucket.ForEachDecoded(tx, &d, func(key string, v encodedTest) error {
					got[key] = v.Who
					return nil
				})
			}); err != nil {
				t.Fatal(err)
			}
			return got
		}
		put("a", "alice")
		put("b", "bob")
		for range 2 {
			if got := walk(); len(got) != 2 || got["a"] != "alice" || got["b"] != "bob" {
				t.Fatalf("walk = %v", got)
			}
		}
		put("b", "carol")
		if got := walk(); len(got) != 2 || got["b"] != "carol" {
			t.Fatalf("after a change walk = %v", got)
		}
		if err := db.Update(func(tx *Tx) error {
			return Named("test-encoded").Put(tx, "a", []byte(`{"who":"mallory"}`))
		}); err != nil {
			t.Fatal(err)
		}
		if got := walk(); len(got) != 1 || got["b"] != "carol" {
			t.Fatalf("with a forged record walk = %v, want only b", got)
		}
	})
}

// TestPutDecodedIsGet: what PutDecoded wrote reads back through the same
// Decoded as Get reads it; a write whose transaction failed is not
// answered (the store never held it); a record forged over one written
// this way reads as absent.
func TestPutDecodedIsGet(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		var d Decoded[map[string]string]
		get := func() (map[string]string, bool) { t.Helper(); return getDecodedK(t, db, &d) }
		if err := db.Update(func(tx *Tx) error { return authTest.PutDecoded(tx, "k", map[string]string{"who": "admin"}, &d) }); err != nil {
			t.Fatal(err)
		}
		if v, found := get(); !found || v["who"] != "admin" {
			t.Fatalf("GetDecoded after PutDecoded = %v %v", v, found)
		}
		failed := errors.New("the transaction fails")
		if err := db.Update(func(tx *Tx) error {
			if err := authTest.PutDecoded(tx, "k", map[string]string{"who": "never"}, &d); err != nil {
				return err
			}
			return failed
		}); !errors.Is(err, failed) {
			t.Fatalf("the failing transaction answered %v", err)
		}
		if v, found := get(); !found || v["who"] != "admin" {
			t.Fatalf("after a failed PutDecoded, GetDecoded = %v %v, want what the store holds", v, found)
		}
		if err := db.Update(func(tx *Tx) error { return authTest.PutDecoded(tx, "k", map[string]string{"who": "operator"}, &d) }); err != nil {
			t.Fatal(err)
		}
		forgeK(t, db)
		if v, found := get(); found {
			t.Fatalf("a record forged over a PutDecoded one read as %v", v)
		}
	})
}

// forgeK writes authTest's "k" behind the store's back: no MAC.
func forgeK(t *testing.T, db *DB) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error {
		return Named(authTest.Name()).Put(tx, "k", []byte(`{"who":"intruder"}`))
	}); err != nil {
		t.Fatal(err)
	}
}

// getDecodedK reads authTest's "k" through d.
func getDecodedK(t *testing.T, db *DB, d *Decoded[map[string]string]) (v map[string]string, found bool) {
	t.Helper()
	if err := db.View(func(tx *Tx) error {
		var err error
		v, found, err = authTest.GetDecoded(tx, "k", d)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v, found
}
