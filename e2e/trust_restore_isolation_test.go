package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
	"stratum/store"
)

// Issue 34: a restore drill's founder reached the live cluster. A
// restored founder now starts isolated, and the mark that says so is in
// the authenticated identity record: an attacker with the store file but
// not the data key who strips the mark, writes it as an unauthenticated
// record or deletes the identity does not free the founder; it does not
// start at all. A founder never restored is not isolated and has nothing
// to take over; a restored one is freed only by stratum takeover.
func TestTrust_RestoredFounderIsFreedOnlyByTakeOver(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dirA, dirB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	a := stratumtest.ServeDev(t, dirA)
	pin := bannerPinOf(t, a)
	bak := filepath.Join(tmp, "a.zst")
	if r := stratum(t, "backup", "--data", dirA, "--out", bak); r.code != 0 {
		t.Fatalf("backup = %d %s", r.code, r.stderr)
	}
	// A founder never restored: no isolation, ready, nothing to take over.
	if strings.Contains(a.Stdout(), "ISOLATED") {
		t.Fatalf("a founder never restored says it is isolated:\n%s", a.Stdout())
	}
	if status, body, _ := call(a, "GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("/readyz of a founder never restored = %d %s", status, body)
	}
	if r := stratum(t, "takeover", "--data", dirA); r.code != 6 || !strings.Contains(r.stderr, "not isolated") {
		t.Fatalf("takeover of a founder never restored = %d %q", r.code, r.stderr)
	}
	stopOK(t, a)

	os.MkdirAll(dirB, 0o700)
	key, _ := os.ReadFile(filepath.Join(dirA, "data.key"))
	os.WriteFile(filepath.Join(dirB, "data.key"), key, 0o600)
	if r := stratum(t, "restore", "--data", dirB, "--in", bak, "--ca-pin", pin); r.code != 0 {
		t.Fatalf("restore = %d %s", r.code, r.stderr)
	}

	withoutMark := func(stored []byte) []byte {
		payload, ok := store.RecordPayload(stored)
		if !ok {
			t.Fatal("the identity is not an authenticated record")
		}
		var id map[string]json.RawMessage
		if err := json.Unmarshal(payload, &id); err != nil || id["restored"] == nil {
			t.Fatalf("the restored identity carries no mark: %s %v", payload, err)
		}
		delete(id, "restored")
		b, _ := json.Marshal(id)
		return b
	}
	attacks := []struct {
		name string
		edit func(b *bolt.Bucket) error
	}{
		{"mark stripped, MAC kept", func(b *bolt.Bucket) error {
			stored := b.Get([]byte("identity"))
			header := len(stored) - len(mustPayload(t, stored))
			return b.Put([]byte("identity"), append(append([]byte(nil), stored[:header]...), withoutMark(stored)...))
		}},
		{"mark stripped, written without a MAC", func(b *bolt.Bucket) error {
			return b.Put([]byte("identity"), withoutMark(b.Get([]byte("identity"))))
		}},
		{"identity deleted", func(b *bolt.Bucket) error { return b.Delete([]byte("identity")) }},
	}
	for _, at := range attacks {
		dir := filepath.Join(tmp, strings.ReplaceAll(at.name, " ", "-"))
		copyDir(t, dirB, dir)
		boltEdit(t, dir, func(tx *bolt.Tx) error { return at.edit(tx.Bucket([]byte("cluster"))) })
		f, err := stratumtest.Spawn(stratumtest.FounderOptions{Dir: dir, StartTimeout: 30 * time.Second})
		if err == nil {
			f.Kill()
			t.Errorf("%s: the founder serves:\n%s", at.name, f.Output())
			continue
		}
		if strings.Contains(err.Error(), "serving cluster") || !strings.Contains(err.Error(), "founder exited") {
			t.Errorf("%s: the founder did not refuse to start:\n%v", at.name, err)
		}
		t.Logf("%s: refused: %v", at.name, err)
	}

	// The restored founder, untouched: isolated until the take-over.
	b := stratumtest.ServeDev(t, dirB)
	if !strings.Contains(b.Stdout(), "ISOLATED") {
		t.Fatalf("the restored founder does not say it is isolated:\n%s", b.Stdout())
	}
	if status, body, _ := call(b, "GET", "/readyz", "", nil); status != 503 || !strings.Contains(string(body), "isolated") {
		t.Fatalf("/readyz of the isolated founder = %d %s", status, body)
	}
	if v := metric(t, b, "stratum_founder_isolated"); v != "1" {
		t.Fatalf("stratum_founder_isolated = %s on the isolated founder, want 1", v)
	}
	if r := stratum(t, "takeover", "--data", dirB); r.code != 0 || !strings.Contains(r.stdout, "taken over") {
		t.Fatalf("takeover = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if status, body, _ := call(b, "GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("/readyz after the take-over = %d %s", status, body)
	}
	if v := metric(t, b, "stratum_founder_isolated"); v != "0" {
		t.Fatalf("stratum_founder_isolated = %s after the take-over, want 0", v)
	}
	if r := stratum(t, "takeover", "--data", dirB); r.code != 6 {
		t.Fatalf("a second takeover = %d %q", r.code, r.stderr)
	}
	// The take-over holds across a restart.
	stopOK(t, b)
	b = stratumtest.ServeDev(t, dirB)
	if strings.Contains(b.Stdout(), "ISOLATED") {
		t.Fatalf("the taken-over founder is isolated again after a restart:\n%s", b.Stdout())
	}
	if status, body, _ := call(b, "GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("/readyz after a restart = %d %s", status, body)
	}
}

func mustPayload(t *testing.T, stored []byte) []byte {
	t.Helper()
	p, ok := store.RecordPayload(stored)
	if !ok {
		t.Fatal("not an authenticated record")
	}
	return p
}

// A restored store moved into PostgreSQL stays isolated, on every
// replica; the take-over on one replica frees the others within a few
// seconds, with no restart.
func TestRestoredReplicasFollowTheTakeOver(t *testing.T) {
	dsn := pgtest.DSN(t)
	tmp := t.TempDir()
	dirA, dirB, dirC := filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "c")
	a := stratumtest.ServeDev(t, dirA)
	bak := filepath.Join(tmp, "a.zst")
	if r := stratum(t, "backup", "--data", dirA, "--out", bak); r.code != 0 {
		t.Fatalf("backup = %d %s", r.code, r.stderr)
	}
	stopOK(t, a)
	os.MkdirAll(dirB, 0o700)
	key, _ := os.ReadFile(filepath.Join(dirA, "data.key"))
	os.WriteFile(filepath.Join(dirB, "data.key"), key, 0o600)
	if r := stratum(t, "restore", "--data", dirB, "--in", bak, "--ca-pin", a.Pin); r.code != 0 {
		t.Fatalf("restore = %d %s", r.code, r.stderr)
	}
	if r := stratum(t, "migrate", "--data", dirB, "--to", dsn); r.code != 0 {
		t.Fatalf("migrate = %d %s %s", r.code, r.stdout, r.stderr)
	}
	b := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dirB, Args: []string{"--store", dsn}})
	c := b.Replica(t, dirC, dsn)
	ready := func(f *stratumtest.Founder) int {
		status, _, _ := call(f, "GET", "/readyz", "", nil)
		return status
	}
	for name, f := range map[string]*stratumtest.Founder{"b": b, "c": c} {
		if !strings.Contains(f.Stdout(), "ISOLATED") || ready(f) != 503 {
			t.Fatalf("replica %s of the restored store is not isolated (readyz %d):\n%s", name, ready(f), f.Stdout())
		}
	}
	if r := stratum(t, "takeover", "--data", dirC); r.code != 0 {
		t.Fatalf("takeover on c = %d %s", r.code, r.stderr)
	}
	if ready(c) != 200 {
		t.Fatalf("c is not ready after its take-over")
	}
	took := time.Now()
	waitUntil(t, "replica b freed by c's take-over", func() bool { return ready(b) == 200 })
	t.Logf("replica b followed the take-over after %v", time.Since(took).Round(time.Millisecond))
	if !strings.Contains(b.Output(), "taken over") {
		t.Errorf("b does not log the take-over:\n%s", b.OutputTail(4096))
	}
}
