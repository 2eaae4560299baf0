package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/internal/pgtest"
)

// The store contract: every backend gives the Tx API the same meaning.
// Each test runs against a bbolt file and a real PostgreSQL database.

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type opener func(t *testing.T) *DB

func contractKey(t *testing.T) *crypto.DataKey {
	t.Helper()
	k, err := crypto.NewDataKey(bytes.Repeat([]byte{0x42}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// backends runs test once per backend; open returns a handle on the same
// store each time it is called (a second replica on PostgreSQL, a reopen
// on bbolt once the first handle is closed).
func backends(t *testing.T, test func(t *testing.T, target string, open opener)) {
	t.Run("bbolt", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "stratum.db")
		test(t, target, openerFor(target))
	})
	t.Run("postgres", func(t *testing.T) {
		target := pgtest.DSN(t)
		test(t, target, openerFor(target))
	})
}

func openerFor(target string) opener {
	return func(t *testing.T) *DB {
		t.Helper()
		db, err := Open(target, contractKey(t))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}

var (
	cBucket = Named("contract")
	cOther  = Named("contract-other")
)

func TestContractReadWrite(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		err := db.Update(func(tx *Tx) error {
			for _, k := range []string{"b", "a", "c", "a\x00z", "\xff"} {
				if err := cBucket.Put(tx, k, []byte("v-"+k)); err != nil {
					return err
				}
			}
			if err := cBucket.Put(tx, "empty", nil); err != nil {
				return err
			}
			if err := tx.putJSON(cOther.bucket(), "j", map[string]int{"n": 7}); err != nil {
				return err
			}
			// A transaction reads its own writes.
			if got := string(cBucket.Get(tx, "b")); got != "v-b" {
				return fmt.Errorf("own write reads %q", got)
			}
			return cBucket.Delete(tx, "c")
		})
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *Tx) error {
			var keys []string
			if err := cBucket.ForEach(tx, func(k string, v []byte) error {
				if k != "empty" && string(v) != "v-"+k {
					t.Errorf("%q = %q", k, v)
				}
				keys = append(keys, k)
				return nil
			}); err != nil {
				return err
			}
			if got := strings.Join(keys, "|"); got != "a|a\x00z|b|empty|\xff" {
				t.Errorf("ForEach order = %q (bytes order wanted)", got)
			}
			if v := cBucket.Get(tx, "empty"); v == nil || len(v) != 0 {
				t.Errorf("empty value = %#v, want non-nil empty", v)
			}
			if cBucket.Get(tx, "c") != nil || cBucket.Get(tx, "missing") != nil || Named("no-such-bucket").Get(tx, "a") != nil {
				t.Error("deleted, missing or unbucketed key found")
			}
			var j map[string]int
			if found, err := tx.getJSON(cOther.bucket(), "j", &j); !found || err != nil || j["n"] != 7 {
				t.Errorf("GetJSON = %v %v %v", j, found, err)
			}
			if tx.Writable() {
				t.Error("a View is writable")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestContractLongScan(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		const n = 700 // more than one page of the PostgreSQL scan
		err := db.Update(func(tx *Tx) error {
			for i := 0; i < n; i++ {
				if err := cBucket.Put(tx, fmt.Sprintf("k%05d", i), []byte{byte(i)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// fn may write while scanning a write transaction.
		seen := 0
		err = db.Update(func(tx *Tx) error {
			return cBucket.ForEach(tx, func(k string, v []byte) error {
				if k != fmt.Sprintf("k%05d", seen) {
					return fmt.Errorf("key %d is %q", seen, k)
				}
				seen++
				return cOther.Put(tx, k, v)
			})
		})
		if err != nil || seen != n {
			t.Fatalf("scan saw %d of %d: %v", seen, n, err)
		}
	})
}

func TestContractRollbackAndHooks(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		boom := errors.New("boom")
		hooked := false
		err := db.Update(func(tx *Tx) error {
			tx.OnCommit(func() { hooked = true })
			if err := cBucket.Put(tx, "k", []byte("kept?")); err != nil {
				return err
			}
			if _, err := cBucket.NextSequence(tx); err != nil {
				return err
			}
			if err := tx.Audit("test.failed", "t", "s", nil); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || hooked {
			t.Fatalf("Update = %v, hook ran %v", err, hooked)
		}
		var seq uint64
		err = db.Update(func(tx *Tx) error {
			if cBucket.Get(tx, "k") != nil {
				t.Error("a failed transaction's write was kept")
			}
			var err error
			seq, err = cBucket.NextSequence(tx)
			tx.OnCommit(func() {
				// The hook sees the committed state from another transaction.
				_ = db.View(func(tx *Tx) error { hooked = string(cBucket.Get(tx, "k")) == "v"; return nil })
			})
			if err != nil {
				return err
			}
			return cBucket.Put(tx, "k", []byte("v"))
		})
		if err != nil || !hooked {
			t.Fatalf("Update = %v, hook saw the commit: %v", err, hooked)
		}
		if seq != 1 {
			t.Errorf("sequence after a rolled-back one = %d, want 1", seq)
		}
		if n, err := db.VerifyAudit(); n != 0 || err != nil {
			t.Errorf("audit after a failed transaction = %d events, %v", n, err)
		}
	})
}

func TestContractWriteInView(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		for name, write := range map[string]func(tx *Tx) error{
			"PutRaw":       func(tx *Tx) error { return cBucket.Put(tx, "k", []byte("v")) },
			"PutSealed":    func(tx *Tx) error { return cBucket.PutSealed(tx, "k", []byte("v")) },
			"NextSequence": func(tx *Tx) error { _, err := cBucket.NextSequence(tx); return err },
			"Audit":        func(tx *Tx) error { return tx.Audit("k", "a", "s", nil) },
		} {
			if err := db.View(write); err == nil {
				t.Errorf("%s in a View: no error", name)
			}
		}
	})
}

func TestContractSealed(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		if err := db.Update(func(tx *Tx) error { return cBucket.PutSealed(tx, "s", []byte("hunter2")) }); err != nil {
			t.Fatal(err)
		}
		err := db.Update(func(tx *Tx) error {
			if raw := cBucket.Get(tx, "s"); bytes.Contains(raw, []byte("hunter2")) {
				t.Error("the secret is stored in the clear")
			}
			pt, found, err := cBucket.GetSealed(tx, "s")
			if err != nil || !found || string(pt) != "hunter2" {
				t.Errorf("GetSealed = %q %v %v", pt, found, err)
			}
			// Moved under another key, it does not open.
			if err := cOther.Put(tx, "s", cBucket.Get(tx, "s")); err != nil {
				return err
			}
			if _, _, err := cOther.GetSealed(tx, "s"); err == nil {
				t.Error("a sealed value moved to another bucket opened")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// Concurrent read-modify-write transactions lose no update: writers run
// one at a time, on PostgreSQL across two replicas.
func TestContractOneWriterAtATime(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		dbs := []*DB{open(t)}
		if isPostgres(target) {
			dbs = append(dbs, open(t))
		}
		const workers, each = 6, 15
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := 0; w < workers; w++ {
			db := dbs[w%len(dbs)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					errs <- db.Update(func(tx *Tx) error {
						var n int
						if _, err := tx.getJSON(cBucket.bucket(), "counter", &n); err != nil {
							return err
						}
						if err := tx.Audit("count", "t", fmt.Sprint(n), nil); err != nil {
							return err
						}
						return tx.putJSON(cBucket.bucket(), "counter", n+1)
					})
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		var n int
		_ = dbs[0].View(func(tx *Tx) error { _, err := tx.getJSON(cBucket.bucket(), "counter", &n); return err })
		if n != workers*each {
			t.Fatalf("counter = %d, want %d: an update was lost", n, workers*each)
		}
		if events, err := dbs[len(dbs)-1].VerifyAudit(); events != workers*each || err != nil {
			t.Fatalf("audit chain: %d events, %v", events, err)
		}
	})
}

// A View sees one commit even while writers commit.
func TestContractViewIsOneSnapshot(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		put := func(v string) {
			if err := db.Update(func(tx *Tx) error { return cBucket.Put(tx, "k", []byte(v)) }); err != nil {
				t.Fatal(err)
			}
		}
		put("v1")
		err := db.View(func(tx *Tx) error {
			first := string(cBucket.Get(tx, "k"))
			done := make(chan struct{})
			go func() { defer close(done); put("v2") }()
			select {
			case <-done:
			case <-time.After(300 * time.Millisecond):
				// A writer that waits for the reader (bbolt growing its
				// map) proves nothing here but breaks nothing either.
			}
			if again := string(cBucket.Get(tx, "k")); again != first {
				t.Errorf("a View read %q then %q", first, again)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestContractNewerSchemaRefused(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		db := open(t)
		if err := db.Update(func(tx *Tx) error {
			return metaBucket.Put(tx, schemaKey, []byte{0, 0, 0, 0, 0, 0, 0, 99})
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err := Open(target, contractKey(t))
		if err == nil || !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("Open of a newer store = %v", err)
		}
	})
}

func TestContractNotify(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		writer := open(t)
		listeners := []*DB{writer}
		if isPostgres(target) {
			listeners = append(listeners, open(t))
		}
		heard := make(chan string, 16)
		for i, db := range listeners {
			db.Subscribe("topic", func(p string) { heard <- fmt.Sprintf("%d:%s", i, p) })
		}
		boom := errors.New("boom")
		_ = writer.Update(func(tx *Tx) error { tx.Notify("topic", "rolled-back"); return boom })
		if err := writer.Update(func(tx *Tx) error { tx.Notify("topic", "j-1"); return cBucket.Put(tx, "k", nil) }); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for i := range listeners {
			want[fmt.Sprintf("%d:j-1", i)] = true
		}
		deadline := time.After(5 * time.Second)
		for len(want) > 0 {
			select {
			case got := <-heard:
				if !want[got] {
					t.Fatalf("heard %q", got)
				}
				delete(want, got)
			case <-deadline:
				t.Fatalf("not heard: %v", want)
			}
		}
		select {
		case got := <-heard:
			t.Fatalf("heard %q twice or a rolled-back note", got)
		case <-time.After(100 * time.Millisecond):
		}
	})
}

// Exactly one replica holds the background lease; it moves when that
// replica goes away.
func TestContractLease(t *testing.T) {
	backends(t, func(t *testing.T, target string, open opener) {
		a := open(t)
		if !isPostgres(target) {
			if !a.HoldsLease() {
				t.Fatal("the only process does not hold the lease")
			}
			return
		}
		b := open(t)
		holders := func() (n int, who *DB) {
			for _, db := range []*DB{a, b} {
				if db.HoldsLease() {
					n++
					who = db
				}
			}
			return
		}
		waitFor := func(what string, ok func() bool) {
			t.Helper()
			for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s", what)
				}
			}
		}
		waitFor("a holder", func() bool { n, _ := holders(); return n == 1 })
		for i := 0; i < 5; i++ {
			if n, _ := holders(); n != 1 {
				t.Fatalf("%d holders", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_, first := holders()
		first.Close()
		other := a
		if first == a {
			other = b
		}
		waitFor("the lease to move", other.HoldsLease)
	})
}

func TestContractUnreachableDatabase(t *testing.T) {
	if pgtest.Bin() == "" {
		t.Skip("PostgreSQL is not installed")
	}
	_, err := Open("postgres://stratum:s3cret-pw@127.0.0.1:1/stratum?connect_timeout=2", contractKey(t))
	if err == nil {
		t.Fatal("opened an unreachable database")
	}
	msg := err.Error()
	if !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "s3cret-pw") {
		t.Fatalf("error must name the host and never the password: %q", msg)
	}
	if _, err := Open("postgres://u:s3cret-pw@[bad", contractKey(t)); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("bad DSN: %v", err)
	}
}

// A database failover as a replica sees it: while the server is down its
// transactions fail with ErrUnavailable (503 UNAVAILABLE upstream) and
// its subscribers are told to re-read; once the server is back it
// reconnects by itself, hears notes again and retakes the lease.
func TestPostgresFailover(t *testing.T) {
	srv := pgtest.Shared(t)
	db := openerFor(srv.NewDatabase(t))(t)
	heard := make(chan string, 64)
	db.Subscribe("topic", func(p string) { heard <- p })
	for deadline := time.Now().Add(5 * time.Second); !db.HoldsLease(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no lease before the failover")
		}
	}
	if err := srv.Halt(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	err := db.Update(func(tx *Tx) error { return cBucket.Put(tx, "k", []byte("v")) })
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Update with the database down = %v, want ErrUnavailable", err)
	}
	if err := db.View(func(tx *Tx) error { cBucket.Get(tx, "k"); return nil }); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("View with the database down = %v, want ErrUnavailable", err)
	}
	select {
	case p := <-heard:
		if p != Everything {
			t.Fatalf("heard %q, want the re-read note", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscribers were not told the connection was lost")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := db.Update(func(tx *Tx) error { tx.Notify("topic", "after"); return cBucket.Put(tx, "k", []byte("v")) })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write 10s after the database came back: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !db.HoldsLease(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease was not retaken after the database came back")
		}
	}
}

func TestContractDeletePrefix(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		keys := []string{"a", "ab", "ab\x00", "ab\xff", "ab\xff\xff", "abc", "ac", "b", "\xff\xff"}
		err := db.Update(func(tx *Tx) error {
			for _, k := range keys {
				if err := cBucket.Put(tx, k, []byte("v")); err != nil {
					return err
				}
			}
			if err := cBucket.DeletePrefix(tx, "ab"); err != nil {
				return err
			}
			return cBucket.DeletePrefix(tx, "\xff")
		})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		_ = db.View(func(tx *Tx) error {
			return cBucket.ForEach(tx, func(k string, _ []byte) error { left = append(left, k); return nil })
		})
		if got := strings.Join(left, "|"); got != "a|ac|b" {
			t.Fatalf("left after DeletePrefix(ab), DeletePrefix(ff): %q", got)
		}
		if err := db.View(func(tx *Tx) error { return cBucket.DeletePrefix(tx, "a") }); err == nil {
			t.Fatal("DeletePrefix in a View: no error")
		}
	})
}

// TestContractSequenceRead: a view reads how far a bucket's sequence has
// gone without moving it (0 for a bucket that never had one).
func TestContractSequenceRead(t *testing.T) {
	backends(t, func(t *testing.T, _ string, open opener) {
		db := open(t)
		for range 3 {
			if err := db.Update(func(tx *Tx) error { _, err := cBucket.NextSequence(tx); return err }); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := db.View(func(tx *Tx) error {
				n, err := cBucket.Sequence(tx)
				if err != nil || n != 3 {
					t.Errorf("Sequence = %d, %v; want 3", n, err)
				}
				if n, err := cOther.Sequence(tx); err != nil || n != 0 {
					t.Errorf("Sequence of a bucket without one = %d, %v; want 0", n, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
