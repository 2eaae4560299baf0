package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"stratum/crypto"
	"stratum/wire"
)

// testKey returns a fresh data key.
func testKey(t *testing.T) *crypto.DataKey {
	t.Helper()
	k, err := crypto.NewDataKey(bytes.Repeat([]byte{byte(len(t.Name()))}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func otherKey(t *testing.T) *crypto.DataKey {
	t.Helper()
	k, err := crypto.NewDataKey(bytes.Repeat([]byte{0xA5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// openTemp opens a new store in a temp dir and closes it at cleanup.
func openTemp(t *testing.T, sealer Sealer) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stratum.db")
	db, err := Open(path, sealer)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// rawUpdate edits a closed store file with bbolt directly.
func rawUpdate(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	defer b.Close()
	if err := b.Update(fn); err != nil {
		t.Fatalf("raw update: %v", err)
	}
}

func TestMigrationsSetSchema(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	if got := db.Schema(); got != SchemaVersion() || SchemaVersion() != len(Migrations()) {
		t.Fatalf("Schema() = %d, SchemaVersion = %d; want %d", got, SchemaVersion(), len(Migrations()))
	}
	if db.Path() != path {
		t.Errorf("Path() = %q, want %q", db.Path(), path)
	}
	db.Close()

	// The file itself records schema 9 and has the buckets the migrations make, declared ones included.
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = b.View(func(tx *bolt.Tx) error {
		for _, name := range []string{metaBucket.Name(), AuditBucket.Name(), declaredInTest.Name()} {
			if tx.Bucket([]byte(name)) == nil {
				return fmt.Errorf("bucket %q missing after migrations", name)
			}
		}
		v := tx.Bucket([]byte(metaBucket.Name())).Get([]byte("schema"))
		if len(v) != 8 || binary.BigEndian.Uint64(v) != uint64(SchemaVersion()) {
			return fmt.Errorf("meta/schema = %x, want big-endian %d", v, SchemaVersion())
		}
		return nil
	})
	b.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Reopening runs no migration twice and keeps the level.
	db2, err := Open(path, testKey(t))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db2.Close()
	if got := db2.Schema(); got != SchemaVersion() {
		t.Fatalf("after reopen Schema() = %d, want %d", got, SchemaVersion())
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("store file mode = %v (%v), want 0600", st.Mode().Perm(), err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	db.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], 99)
		return tx.Bucket([]byte(metaBucket.Name())).Put([]byte("schema"), buf[:])
	})
	for name, open := range map[string]func() (*DB, error){
		"Open":         func() (*DB, error) { return Open(path, testKey(t)) },
		"OpenReadOnly": func() (*DB, error) { return OpenReadOnly(path, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			db, err := open()
			if err == nil {
				db.Close()
				t.Fatal("a store with schema 99 was opened")
			}
			msg := err.Error()
			if !strings.Contains(msg, "99") || !strings.Contains(msg, fmt.Sprint(SchemaVersion())) || !strings.Contains(msg, "newer") {
				t.Fatalf("error does not name both versions: %q", msg)
			}
		})
	}
	// The refusal must not have "migrated" the file down.
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_ = b.View(func(tx *bolt.Tx) error {
		if v := binary.BigEndian.Uint64(tx.Bucket([]byte(metaBucket.Name())).Get([]byte(schemaKey))); v != 99 {
			t.Errorf("schema after refused open = %d, want 99 untouched", v)
		}
		return nil
	})
}

func TestSealedValues(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	secret := []byte("correct horse battery staple")
	if err := db.Update(func(tx *Tx) error { return Named("secrets").PutSealed(tx, "pg", secret) }); err != nil {
		t.Fatal(err)
	}
	err := db.Update(func(tx *Tx) error {
		raw := Named("secrets").Get(tx, "pg")
		if raw == nil {
			return errors.New("sealed value not stored")
		}
		if bytes.Contains(raw, secret) {
			return errors.New("sealed value holds the plaintext")
		}
		got, found, err := Named("secrets").GetSealed(tx, "pg")
		if err != nil || !found || !bytes.Equal(got, secret) {
			return fmt.Errorf("GetSealed = %q, %v, %v; want the plaintext", got, found, err)
		}
		// Copy the sealed bytes elsewhere: the bucket/key binding must refuse them.
		cp := append([]byte(nil), raw...)
		if err := Named("secrets").Put(tx, "other", cp); err != nil {
			return err
		}
		if err := Named("elsewhere").Put(tx, "pg", cp); err != nil {
			return err
		}
		for _, at := range [][2]string{{"secrets", "other"}, {"elsewhere", "pg"}} {
			pt, found, err := Named(at[0]).GetSealed(tx, at[1])
			if err == nil {
				return fmt.Errorf("a sealed value copied to %s/%s opened: %q", at[0], at[1], pt)
			}
			if !found || pt != nil {
				return fmt.Errorf("copied value at %s/%s: found=%v pt=%q", at[0], at[1], found, pt)
			}
			if !strings.Contains(err.Error(), at[0]+"/"+at[1]) {
				return fmt.Errorf("error does not name %s/%s: %v", at[0], at[1], err)
			}
		}
		if _, found, err := Named("secrets").GetSealed(tx, "absent"); found || err != nil {
			return fmt.Errorf("absent sealed value: found=%v err=%v", found, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSealedValueUnderAnotherDataKey(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	if err := db.Update(func(tx *Tx) error { return Named("secrets").PutSealed(tx, "ca-key", []byte("PEM")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db2, err := Open(path, otherKey(t))
	if err != nil {
		t.Fatalf("open with another key: %v", err)
	}
	defer db2.Close()
	err = db2.View(func(tx *Tx) error {
		pt, found, err := Named("secrets").GetSealed(tx, "ca-key")
		if err == nil {
			return fmt.Errorf("opened under another data key: %q", pt)
		}
		if !found || len(pt) != 0 {
			return fmt.Errorf("found=%v pt=%q: a wrong key must not look like an empty or absent value", found, pt)
		}
		if !strings.Contains(err.Error(), "data.key") || !strings.Contains(err.Error(), "secrets/ca-key") {
			return fmt.Errorf("error is not clear about the key: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestUpdateOnCommitAndRollback(t *testing.T) {
	db, _ := openTemp(t, testKey(t))

	var sawCommitted bool
	hookRuns := 0
	err := db.Update(func(tx *Tx) error {
		tx.OnCommit(func() {
			hookRuns++
			// A hook sees the committed state from a new transaction.
			_ = db.View(func(tx *Tx) error {
				sawCommitted = string(Named("b").Get(tx, "k")) == "v1"
				return nil
			})
		})
		if hookRuns != 0 {
			t.Error("OnCommit ran before the transaction ended")
		}
		return Named("b").Put(tx, "k", []byte("v1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if hookRuns != 1 || !sawCommitted {
		t.Fatalf("hook runs = %d, saw committed value = %v; want 1, true", hookRuns, sawCommitted)
	}

	boom := errors.New("boom")
	hookRuns = 0
	err = db.Update(func(tx *Tx) error {
		tx.OnCommit(func() { hookRuns++ })
		if err := Named("b").Put(tx, "k", []byte("v2")); err != nil {
			return err
		}
		if err := Named("b").Put(tx, "new", []byte("x")); err != nil {
			return err
		}
		if err := tx.Audit("test.failed", "t", "s", nil); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	if hookRuns != 0 {
		t.Fatalf("OnCommit ran %d times for a failed Update", hookRuns)
	}
	_ = db.View(func(tx *Tx) error {
		if got := string(Named("b").Get(tx, "k")); got != "v1" {
			t.Errorf("failed Update changed b/k to %q", got)
		}
		if Named("b").Get(tx, "new") != nil {
			t.Error("failed Update left b/new")
		}
		return nil
	})
	if evs, err := db.AuditEvents(0, 10); err != nil || len(evs) != 0 {
		t.Errorf("failed Update left audit events: %v %v", evs, err)
	}
}

// A panic inside an Update (a handler bug recovered by the router's panic
// handler) must not leave the store's lock held: Close at shutdown would
// then wait forever and every later Update and View would block.
func TestUpdatePanicReleasesLock(t *testing.T) {
	// No Close at cleanup: on failure it would hang the test binary.
	db, err := Open(filepath.Join(t.TempDir(), "stratum.db"), testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = db.Update(func(tx *Tx) error { panic("handler bug") })
	}()
	done := make(chan error, 1)
	go func() {
		if err := db.Update(func(tx *Tx) error { return Named("b").Put(tx, "k", []byte("v")) }); err != nil {
			done <- err
			return
		}
		done <- db.Close()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("after a panicking Update the store is stuck: Update/Close did not return (DB.Update does not release db.mu on panic)")
	}
}

func TestClosedStore(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := db.Update(func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close = %v, want ErrClosed", err)
	}
	if err := db.View(func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("View after Close = %v, want ErrClosed", err)
	}
}

func TestJSONValues(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	type rec struct {
		A string `json:"a"`
		N int    `json:"n"`
	}
	err := db.Update(func(tx *Tx) error {
		for i, k := range []string{"b", "a", "c"} {
			if err := tx.putJSON(Named("recs").bucket(), k, rec{A: k, N: i}); err != nil {
				return err
			}
		}
		return Named("recs").Put(tx, "z", []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		var r rec
		if found, err := tx.getJSON(Named("recs").bucket(), "a", &r); !found || err != nil || r != (rec{"a", 1}) {
			t.Errorf("GetJSON a = %+v %v %v", r, found, err)
		}
		if found, err := tx.getJSON(Named("recs").bucket(), "missing", &r); found || err != nil {
			t.Errorf("GetJSON missing: found=%v err=%v", found, err)
		}
		if found, err := tx.getJSON(Named("nobucket").bucket(), "a", &r); found || err != nil {
			t.Errorf("GetJSON in absent bucket: found=%v err=%v", found, err)
		}
		if _, err := tx.getJSON(Named("recs").bucket(), "z", &r); err == nil || !strings.Contains(err.Error(), "recs/z") {
			t.Errorf("GetJSON of bad JSON = %v, want an error naming recs/z", err)
		}
		var keys []string
		_ = Named("recs").ForEach(tx, func(k string, _ []byte) error { keys = append(keys, k); return nil })
		if strings.Join(keys, ",") != "a,b,c,z" {
			t.Errorf("ForEach order = %v", keys)
		}
		return nil
	})
	if err := db.Update(func(tx *Tx) error {
		if err := Named("recs").Delete(tx, "a"); err != nil {
			return err
		}
		return Named("nobucket").Delete(tx, "x")
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		if Named("recs").Get(tx, "a") != nil {
			t.Error("Delete left recs/a")
		}
		return nil
	})
}

// A write attempted in a read-only transaction must be an error, not a
// nil-pointer panic (Tx.bucket returns a nil bucket and a nil error).
func TestWriteInViewIsAnError(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	cases := map[string]func(tx *Tx) error{
		"PutRaw new bucket":   func(tx *Tx) error { return Named("never-created").Put(tx, "k", []byte("v")) },
		"PutSealed":           func(tx *Tx) error { return Named("never-created").PutSealed(tx, "k", []byte("v")) },
		"NextSequence":        func(tx *Tx) error { _, err := Named("never-created").NextSequence(tx); return err },
		"PutRaw existing":     func(tx *Tx) error { return metaBucket.Put(tx, "k", []byte("v")) },
		"Audit (bucket made)": func(tx *Tx) error { return tx.Audit("k", "a", "s", nil) },
	}
	for name, write := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("write in a View panicked: %v", r)
					}
				}()
				err = db.View(write)
			}()
			if err == nil {
				t.Fatal("write in a View returned no error")
			}
		})
	}
}

func appendEvents(t *testing.T, db *DB, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		err := db.Update(func(tx *Tx) error {
			return tx.Audit("test.event", "tester", fmt.Sprintf("subject-%d", i), map[string]string{"i": fmt.Sprint(i)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditChain(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	if n, err := db.VerifyAudit(); n != 0 || err != nil {
		t.Fatalf("empty chain: %d, %v", n, err)
	}
	appendEvents(t, db, 5)
	n, err := db.VerifyAudit()
	if n != 5 || err != nil {
		t.Fatalf("VerifyAudit = %d, %v; want 5, nil", n, err)
	}
	evs, err := db.AuditEvents(0, 100)
	if err != nil || len(evs) != 5 {
		t.Fatalf("AuditEvents = %d events, %v", len(evs), err)
	}
	if evs[0].Prev != strings.Repeat("0", 64) {
		t.Errorf("first event's prev = %q, want 64 zeros", evs[0].Prev)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || ev.Kind != "test.event" || ev.Actor != "tester" || ev.Subject != fmt.Sprintf("subject-%d", i) || ev.Data["i"] != fmt.Sprint(i) || ev.Time.IsZero() {
			t.Errorf("event %d = %+v", i, ev)
		}
		if i > 0 && ev.Prev == evs[i-1].Prev {
			t.Errorf("event %d repeats the previous prev hash", ev.Seq)
		}
	}
	page, err := db.AuditEvents(2, 2)
	if err != nil || len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 {
		t.Fatalf("AuditEvents(2, 2) = %+v, %v; want seq 3 and 4", page, err)
	}
	if page, err := db.AuditEvents(5, 10); err != nil || len(page) != 0 {
		t.Errorf("AuditEvents after the last = %+v, %v", page, err)
	}
}

// TestAuditHeadOncePerTransaction: a transaction appending several
// events (a registration appends two; a group commit runs several calls
// in one bbolt transaction) seals the head of its last event once, and
// the chain, the sealed head and the OnAudit watcher all end there.
func TestAuditHeadOncePerTransaction(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	var mu sync.Mutex
	var heard AuditMark
	db.OnAudit(func(m AuditMark) {
		mu.Lock()
		defer mu.Unlock()
		if m.Seq > heard.Seq {
			heard = m
		}
	})
	three := func(tx *Tx) error {
		for i := range 3 {
			if err := tx.Audit("test.event", "tester", fmt.Sprint(i), nil); err != nil {
				return err
			}
		}
		return nil
	}
	if err := db.Update(three); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.Batch(three); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mark, err := db.AuditMark()
	if err != nil || mark.Seq != 15 {
		t.Fatalf("AuditMark = %+v, %v; want seq 15", mark, err)
	}
	mu.Lock()
	if heard != mark {
		t.Errorf("OnAudit heard %+v last, the sealed head is %+v", heard, mark)
	}
	mu.Unlock()
	if n, err := db.VerifyAudit(); n != 15 || err != nil {
		t.Fatalf("VerifyAudit = %d, %v; want 15, nil", n, err)
	}
	db.Close()
	if n, err := VerifyAuditFile(path, testKey(t)); n != 15 || err != nil {
		t.Fatalf("VerifyAuditFile = %d, %v; want 15, nil", n, err)
	}
}

// after+1 must not wrap around: asking for events after the largest
// sequence returns none, not the whole log from the start.
func TestAuditEventsAfterMaxUint64(t *testing.T) {
	db, _ := openTemp(t, testKey(t))
	appendEvents(t, db, 3)
	evs, err := db.AuditEvents(math.MaxUint64, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("AuditEvents(MaxUint64) returned %d events starting at seq %d; want none", len(evs), evs[0].Seq)
	}
}

func TestAuditTamperDetected(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(b *bolt.Bucket) error
		want   []string // substrings of the VerifyAudit error
	}{
		{
			name: "edit event 3's kind",
			tamper: func(b *bolt.Bucket) error {
				var ev wire.AuditEvent
				if err := json.Unmarshal(b.Get(seqKey(3)), &ev); err != nil {
					return err
				}
				ev.Kind = "nothing.happened"
				raw, _ := json.Marshal(ev)
				return b.Put(seqKey(3), raw)
			},
			want: []string{"event 3", "altered"},
		},
		{
			name: "edit event 3's bytes, even whitespace",
			tamper: func(b *bolt.Bucket) error {
				raw := append(append([]byte(nil), b.Get(seqKey(3))...), ' ')
				return b.Put(seqKey(3), raw)
			},
			want: []string{"event 3"},
		},
		{
			name: "event 2 replaced by garbage",
			tamper: func(b *bolt.Bucket) error {
				return b.Put(seqKey(2), []byte("not json"))
			},
			want: []string{"event 2"},
		},
		{
			name:   "delete middle event 3",
			tamper: func(b *bolt.Bucket) error { return b.Delete(seqKey(3)) },
			want:   []string{"from event 2 to 4"},
		},
		{
			name:   "delete the first event",
			tamper: func(b *bolt.Bucket) error { return b.Delete(seqKey(1)) },
			want:   []string{"to 2"},
		},
		{
			name: "event 5's bytes copied over event 4",
			tamper: func(b *bolt.Bucket) error {
				return b.Put(seqKey(4), append([]byte(nil), b.Get(seqKey(5))...))
			},
			want: []string{"event 5", "key 4"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, path := openTemp(t, testKey(t))
			appendEvents(t, db, 5)
			db.Close()
			rawUpdate(t, path, func(tx *bolt.Tx) error { return tc.tamper(tx.Bucket([]byte(AuditBucket.Name()))) })
			_, err := VerifyAuditFile(path, testKey(t))
			if err == nil {
				t.Fatal("VerifyAudit passed a tampered chain")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("VerifyAudit error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func fill(t *testing.T, db *DB) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		for i := 0; i < 50; i++ {
			if err := tx.putJSON(Named("items").bucket(), fmt.Sprintf("k%03d", i), map[string]int{"i": i}); err != nil {
				return err
			}
		}
		if err := Named("secrets").PutSealed(tx, "s", []byte("sealed-secret")); err != nil {
			return err
		}
		return tx.Audit("filled", "t", "items", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenReadOnlyHasNoKey(t *testing.T) {
	db, path := openTemp(t, testKey(t))
	fill(t, db)
	db.Close()
	if n, err := VerifyAuditFile(path, testKey(t)); n != 1 || err != nil {
		t.Fatalf("VerifyAuditFile = %d, %v", n, err)
	}
	ro, err := OpenReadOnly(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	// The links are keyed: without the data key there is nothing to check.
	if _, err := ro.VerifyAudit(); !errors.Is(err, errAuditNeedsKey) {
		t.Fatalf("VerifyAudit without the key = %v, want errAuditNeedsKey", err)
	}
	// Without a data key a sealed value stays sealed: an error, not a panic.
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("GetSealed on a store opened without a key panicked: %v", r)
			}
		}()
		_ = ro.View(func(tx *Tx) error {
			if pt, _, err := Named("secrets").GetSealed(tx, "s"); err == nil {
				t.Errorf("GetSealed without a key returned %q", pt)
			}
			return nil
		})
	}()
	if _, err := OpenReadOnly(filepath.Join(t.TempDir(), "absent.db"), nil); err == nil {
		t.Fatal("OpenReadOnly of a missing file succeeded (it must not create one)")
	}
}
