package e2e

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"

	bolt "go.etcd.io/bbolt"
)

// copyDir copies a stopped founder's data directory.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	os.Remove(filepath.Join(to, "control.sock"))
}

// boltEdit changes a stopped founder's store with bbolt directly, as an
// attacker with the file (not the data key) can.
func boltEdit(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "stratum.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func seq(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

// toFirstBuild turns a data directory into what the first build wrote:
// schema 1, an unkeyed chain without a sealed head, tokens without
// parents or creators.
func toFirstBuild(tx *bolt.Tx) error {
	if err := stratumtest.StripRecordMACs(tx); err != nil {
		return err
	}
	meta := tx.Bucket([]byte("meta"))
	if err := meta.Put([]byte("schema"), seq(1)); err != nil {
		return err
	}
	if err := meta.Delete([]byte("auditHead")); err != nil {
		return err
	}
	toks := tx.Bucket([]byte("iam-tokens"))
	var keys [][]byte
	_ = toks.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
	for _, k := range keys {
		var tok map[string]any
		if err := json.Unmarshal(toks.Get(k), &tok); err != nil {
			return err
		}
		delete(tok, "parent")
		delete(tok, "createdBy")
		raw, _ := json.Marshal(tok)
		if err := toks.Put(k, raw); err != nil {
			return err
		}
	}
	// The first build's events name the user, not the principal.
	return stratumtest.RelinkAuditPlain(tx, func(ev map[string]any) {
		if a, _ := ev["actor"].(string); strings.HasPrefix(a, "session:") || strings.HasPrefix(a, "user:") {
			ev["actor"] = "admin@stratum.local"
		}
	})
}

// stoppedWithTokens runs a founder on dir, creates n API tokens, checks
// the chain through the control socket while serving, and stops it.
func stoppedWithTokens(t *testing.T, dir string, n int, extra ...string) []apiToken {
	t.Helper()
	f := stratumtest.ServeDev(t, dir, extra...)
	admin := f.Admin(t).Token
	var toks []apiToken
	for i := 0; i < n; i++ {
		tok, status, err := createToken(f, admin, "audited")
		if err != nil || status != 201 {
			t.Fatalf("create token: %d %v", status, err)
		}
		toks = append(toks, tok)
	}
	if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Fatalf("audit verify while serving = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if code, _ := f.Stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("founder exit %d", code)
	}
	return toks
}

// Issue 10 item 7: `stratum audit verify` said "intact" after the newest
// events were deleted, after a middle event was edited and the later
// links recomputed, and when the audit bucket was gone.
func TestTrust07_AuditCannotBeTrimmed(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	stoppedWithTokens(t, dir, 3)
	if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Fatalf("offline audit verify = %d %q %q", r.code, r.stdout, r.stderr)
	}
	var last uint64
	boltEdit(t, dir, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket([]byte("audit")).Cursor().Last()
		last = binary.BigEndian.Uint64(k)
		return nil
	})

	cases := []struct {
		name   string
		tamper func(tx *bolt.Tx) error
		want   string
	}{
		{"edit a middle event", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("audit"))
			var ev map[string]any
			_ = json.Unmarshal(b.Get(seq(3)), &ev)
			ev["actor"] = "someone-else"
			raw, _ := json.Marshal(ev)
			return b.Put(seq(3), raw)
		}, "event 4 does not chain to event 3"},
		{"edit a middle event and recompute every later link", func(tx *bolt.Tx) error {
			return stratumtest.RelinkAuditPlain(tx, func(ev map[string]any) {
				if ev["seq"] == float64(3) {
					ev["kind"] = "nothing.happened"
				}
			})
		}, "does not chain"},
		{"remove the newest events", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("audit"))
			if err := b.Delete(seq(last)); err != nil {
				return err
			}
			return b.Delete(seq(last - 1))
		}, "newest events were removed"},
		{"remove the audit bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("audit")) }, "audit bucket is missing"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := filepath.Join(tmp, "tampered-"+string(rune('a'+i)))
			copyDir(t, dir, cp)
			boltEdit(t, cp, tc.tamper)
			r := stratum(t, "audit", "verify", "--data", cp)
			if r.code != 4 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("audit verify = %d %q %q, want exit 4 (trust failure) naming %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}

	// Without the data key, or without a store, nothing can be checked: a
	// failure (exit 1) saying so, neither "intact" nor a broken chain
	// (exit 4: a mistyped --data is not tampering).
	noKey := filepath.Join(tmp, "no-key")
	copyDir(t, dir, noKey)
	os.Remove(filepath.Join(noKey, "data.key"))
	noStore := filepath.Join(tmp, "no-store")
	copyDir(t, dir, noStore)
	os.Remove(filepath.Join(noStore, "stratum.db"))
	for _, d := range []string{noKey, noStore, filepath.Join(tmp, "no-such-dir")} {
		if r := stratum(t, "audit", "verify", "--data", d); r.code != 1 || !strings.Contains(r.stderr, "not read") || strings.Contains(r.stderr, "broken") {
			t.Fatalf("audit verify --data %s = %d %q %q, want exit 1 saying the chain was not read", d, r.code, r.stdout, r.stderr)
		} else if d == noStore && !strings.Contains(r.stderr, "STRATUM_STORE") {
			t.Fatalf("audit verify of a directory without stratum.db does not point to --store/STRATUM_STORE: %q", r.stderr)
		}
	}
}

// A data directory made by the first build (unkeyed chain, tokens without
// parents) is migrated once at start, marked by audit events.
func TestTrust07_FirstBuildDataDirMigrated(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	tok := stoppedWithTokens(t, dir, 1)[0]
	email, password := credentials(t, dir)
	boltEdit(t, dir, toFirstBuild)
	if err := stratumtest.ForgetAuditHWM(dir); err != nil {
		t.Fatal(err)
	}
	if r := stratum(t, "audit", "verify", "--data", dir); r.code == 0 || !strings.Contains(r.stderr, "predates keyed links") {
		t.Fatalf("audit verify of a first-build store = %d %q %q", r.code, r.stdout, r.stderr)
	}

	for round := 0; round < 2; round++ {
		f := stratumtest.ServeDev(t, dir)
		if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 || !strings.Contains(r.stdout, "intact") {
			t.Fatalf("round %d: audit verify after migration = %d %q %q", round, r.code, r.stdout, r.stderr)
		}
		admin := f.Login(t, email, password).Token
		count := map[string]int{}
		for _, ev := range auditEvents(t, f, admin) {
			count[ev.Kind]++
			if ev.Kind == "audit.chain.keyed" && ev.Data["previousChain"] != "intact" {
				t.Errorf("migration marker %+v, want previousChain intact", ev)
			}
		}
		if count["audit.chain.keyed"] != 1 || count["iam.tokens.migrated"] != 1 {
			t.Fatalf("round %d: migration events %v, want each once", round, count)
		}
		_, raw, _ := call(f, "GET", "/v1/iam/tokens", admin, nil)
		if !strings.Contains(string(raw), `"tokenId":"`+tok.ID+`"`) || !strings.Contains(string(raw), `"createdBy":"user:`+email+`"`) {
			t.Fatalf("the old token after migration: %s", raw)
		}
		if status, _, _ := call(f, "GET", "/v1/iam/tokens", tok.Token, nil); status != 403 {
			t.Errorf("the old token after migration = %d, want 403 (authenticated, not allowed)", status)
		}
		if code, _ := f.Stop(syscall.SIGTERM, 10*time.Second); code != 0 {
			t.Fatalf("founder exit %d", code)
		}
	}
	if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 {
		t.Fatalf("offline audit verify after migration = %d %q", r.code, r.stderr)
	}
}
