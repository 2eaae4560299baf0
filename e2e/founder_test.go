package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stratum/internal/freeport"
	"stratum/internal/stratumtest"

	bolt "go.etcd.io/bbolt"
)

func TestServeWithoutDevNeedsInit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	r := stratum(t, "serve", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0")
	if r.code == 0 {
		t.Fatalf("serve on an empty dir without --dev succeeded: %s", r.stdout)
	}
	if !strings.Contains(r.stderr, "stratum init") {
		t.Fatalf("the error does not name `stratum init`: %q", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "stratum.db")); err == nil {
		t.Fatal("a refused serve created a store")
	}
}

// TestServeDevPortTakenLeavesNothing: a first `serve --dev` whose admin
// API or join port is taken fails, names the listener, and leaves no
// half-initialised cluster behind: the data directory is as it was
// (absent, or empty), so the next run initializes afresh and prints the
// admin credentials it made.
func TestServeDevPortTakenLeavesNothing(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free := "127.0.0.1:" + strconv.Itoa(freeport.Must(t, "127.0.0.1"))
	for _, tc := range []struct{ name, api, join, want string }{
		{"admin API port taken", taken.Addr().String(), free, "admin API listener"},
		{"join port taken", free, taken.Addr().String(), "join listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			absent := filepath.Join(t.TempDir(), "data")
			empty := t.TempDir()
			for _, dir := range []string{absent, empty} {
				r := stratum(t, "serve", "--dev", "--data", dir, "--api-addr", tc.api, "--join-addr", tc.join)
				if r.code == 0 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "address already in use") {
					t.Fatalf("serve --dev on %s: exit %d, want a failure naming the %s:\n%s%s", dir, r.code, tc.want, r.stdout, r.stderr)
				}
				entries, err := os.ReadDir(dir)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				if len(entries) > 0 || (dir == empty && err != nil) {
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					t.Errorf("a failed serve --dev left %s holding %v:\n%s", dir, names, r.stdout)
				}
			}
		})
	}
}

func TestInitFromClusterFile(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("unknown key", func(t *testing.T) {
		dir := filepath.Join(tmp, "unknown")
		cfg := write("unknown.yaml", "parentDomain: stratum.example.com\nregion: lab-1\nfounder:\n  mgmtIp: 192.0.2.10\n  rackName: r1\n")
		r := stratum(t, "init", "--data", dir, "--config", cfg)
		if r.code == 0 || !strings.Contains(r.stderr, "rackName") {
			t.Fatalf("init with an unknown key = %d, stderr %q; want a failure naming rackName", r.code, r.stderr)
		}
		for _, f := range []string{"stratum.db", "data.key", "bootstrap-credentials.txt"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				t.Errorf("a refused init left %s", f)
			}
		}
	})

	t.Run("every problem at once", func(t *testing.T) {
		dir := filepath.Join(tmp, "invalid")
		cfg := write("invalid.yaml", "parentDomain: Not_A_Domain\nclusterRelease: latest\nfounder:\n  mgmtIp: 192.0.2.10/24\n")
		r := stratum(t, "init", "--data", dir, "--config", cfg)
		if r.code == 0 {
			t.Fatal("init with an invalid file succeeded")
		}
		for _, field := range []string{"parentDomain", "region", "clusterRelease", "founder.mgmtIp"} {
			if !strings.Contains(r.stderr, field) {
				t.Errorf("stderr does not name %s: %q", field, r.stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "stratum.db")); err == nil {
			t.Error("a refused init left a store")
		}
	})

	t.Run("init, then init again", func(t *testing.T) {
		dir := filepath.Join(tmp, "good")
		cfg := write("good.yaml", "parentDomain: stratum.example.com\nregion: lab-1\nclusterRelease: 0.6.0\nadminEmail: ops@cloud.internal\ndnsUpstreamServers: []\n")
		r := stratum(t, "init", "--data", dir, "--config", cfg)
		if r.code != 0 {
			t.Fatalf("init = %d %q", r.code, r.stderr)
		}
		initOut := r.stdout
		if !regexp.MustCompile(`CA pin: sha256:[0-9a-f]{64}`).MatchString(r.stdout) {
			t.Errorf("init does not print the CA pin: %q", r.stdout)
		}
		email, _ := credentials(t, dir)
		if email != "ops@cloud.internal" {
			t.Errorf("bootstrap email = %q", email)
		}
		for name, mode := range map[string]os.FileMode{"bootstrap-credentials.txt": 0o600, "data.key": 0o600, "stratum.db": 0o600, "ca.pem": 0o644} {
			if got := fileMode(t, filepath.Join(dir, name)); got != mode {
				t.Errorf("%s mode %v, want %v", name, got, mode)
			}
		}
		creds, _ := os.ReadFile(filepath.Join(dir, "bootstrap-credentials.txt"))
		key, _ := os.ReadFile(filepath.Join(dir, "data.key"))

		r = stratum(t, "init", "--data", dir, "--config", cfg)
		if r.code == 0 || !strings.Contains(r.stderr, "already") {
			t.Fatalf("second init = %d %q, want a refusal saying it is already initialized", r.code, r.stderr)
		}
		creds2, _ := os.ReadFile(filepath.Join(dir, "bootstrap-credentials.txt"))
		key2, _ := os.ReadFile(filepath.Join(dir, "data.key"))
		if !bytes.Equal(creds, creds2) || !bytes.Equal(key, key2) {
			t.Fatal("the refused init changed the credentials or the data key")
		}
		if pin := caPin(t, filepath.Join(dir, "ca.pem")); !strings.Contains(initOut, pin) {
			t.Errorf("init printed a CA pin other than ca.pem's %s", pin)
		}

		// Deleting data.key makes the secrets unreadable, never silently empty.
		if err := os.Rename(filepath.Join(dir, "data.key"), filepath.Join(tmp, "data.key.saved")); err != nil {
			t.Fatal(err)
		}
		r = stratum(t, "serve", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0")
		if r.code == 0 || !strings.Contains(r.stderr, "data.key") {
			t.Fatalf("serve without data.key = %d %q, want a failure naming data.key", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "data.key")); err == nil {
			t.Fatal("serve created a new data.key for an existing store")
		}
		// Another key: the sealed CA key does not open.
		if err := os.WriteFile(filepath.Join(dir, "data.key"), bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
			t.Fatal(err)
		}
		r = stratum(t, "serve", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0")
		if r.code == 0 || !strings.Contains(r.stderr, "data.key") {
			t.Fatalf("serve with another data.key = %d %q, want a failure naming data.key", r.code, r.stderr)
		}
	})

	t.Run("flags from STRATUM_* twins", func(t *testing.T) {
		dir := filepath.Join(tmp, "env")
		r := stratumEnv(t, []string{"STRATUM_DATA=" + dir, "STRATUM_PARENT_DOMAIN=env.example.com", "STRATUM_REGION=env-1"}, "init")
		if r.code != 0 {
			t.Fatalf("init from the environment = %d %q", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "stratum.db")); err != nil {
			t.Fatalf("STRATUM_DATA was not used: %v", err)
		}
		if r := stratumEnv(t, []string{"STRATUM_DATA=" + dir}, "audit", "verify"); r.code != 0 || !strings.Contains(r.stdout, "intact: 2 events") {
			t.Fatalf("audit verify from the environment = %d %q %q", r.code, r.stdout, r.stderr)
		}
	})
}

// SIGKILL in the middle of acknowledged writes loses none of them; the
// audit chain verifies offline and online, and a tampered event is named.
func TestKillDurabilityAndAudit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)
	admin := f.Login(t, email, password).Token
	if pin := caPin(t, filepath.Join(dir, "ca.pem")); !strings.Contains(f.Stdout(), "CA pin:         "+pin) {
		t.Errorf("the banner does not show ca.pem's pin %s:\n%s", pin, f.Stdout())
	}

	var mu sync.Mutex
	var acked []apiToken
	firstAck := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				tok, status, err := createToken(f, admin, "kill-"+string(rune('a'+g))+"-"+strings.Repeat("x", i%3))
				if err != nil || status != 201 {
					if ctx.Err() == nil && err == nil {
						t.Errorf("create token answered %d", status)
					}
					return // the process is gone: stop
				}
				mu.Lock()
				acked = append(acked, tok)
				mu.Unlock()
				once.Do(func() { close(firstAck) })
			}
		}(g)
	}
	select {
	case <-firstAck:
	case <-time.After(30 * time.Second):
		t.Fatal("no token was created within 30s")
	}
	time.Sleep(300 * time.Millisecond) // let writes race the kill
	code, _ := f.Stop(syscall.SIGKILL, 10*time.Second)
	cancel()
	wg.Wait()
	if code != -int(syscall.SIGKILL) {
		t.Fatalf("founder exit %d, want killed by SIGKILL", code)
	}
	if len(acked) < 4 {
		t.Fatalf("only %d writes were acknowledged before the kill", len(acked))
	}
	t.Logf("%d tokens acknowledged before SIGKILL", len(acked))

	// Offline verify works though a stale control.sock is left behind.
	if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Fatalf("audit verify after SIGKILL = %d %q %q", r.code, r.stdout, r.stderr)
	}

	f2 := stratumtest.ServeDev(t, dir)
	// The login session was acknowledged too: it still works.
	ids := tokenIDs(t, f2, admin)
	for _, tok := range acked {
		if !ids[tok.ID] {
			t.Errorf("acknowledged token %s lost by SIGKILL", tok.ID)
		}
	}
	for _, tok := range []apiToken{acked[0], acked[len(acked)-1]} {
		if status, body, _ := call(f2, "GET", "/v1/iam/tokens", tok.Token, nil); status != 403 {
			t.Errorf("acknowledged token %s after restart = %d %s, want 403 (authenticated, not allowed)", tok.ID, status, body)
		}
	}

	// Online verify goes through the running founder's control socket.
	r := stratum(t, "audit", "verify", "--data", dir)
	m := regexp.MustCompile(`intact: (\d+) events`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("audit verify while serving = %d %q %q", r.code, r.stdout, r.stderr)
	}
	var events int
	_ = json.Unmarshal([]byte(m[1]), &events)
	if events < len(acked)+3 {
		t.Errorf("%d audit events for %d acknowledged tokens", events, len(acked))
	}

	// SIGTERM: a clean, quick exit.
	code, took := f2.Stop(syscall.SIGTERM, 10*time.Second)
	if code != 0 || took > 5*time.Second {
		t.Fatalf("SIGTERM: exit %d after %v, want 0 within 5s\n%s", code, took, f2.Stderr())
	}
	if _, err := os.Stat(filepath.Join(dir, "control.sock")); err == nil {
		t.Error("control.sock left after a clean shutdown")
	}
	if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 {
		t.Fatalf("audit verify after SIGTERM = %d %q", r.code, r.stderr)
	}

	// No secret reaches the file in clear; secret files are 0600.
	db, err := os.ReadFile(filepath.Join(dir, "stratum.db"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"admin password": password, "session token": admin, "session secret": admin[strings.LastIndex(admin, ".")+1:]}
	for _, tok := range acked {
		secrets["token "+tok.ID] = tok.Token
		secrets["secret of "+tok.ID] = tok.Token[strings.LastIndex(tok.Token, ".")+1:]
	}
	for what, s := range secrets {
		if bytes.Contains(db, []byte(s)) {
			t.Errorf("stratum.db holds the %s in clear", what)
		}
	}
	for _, name := range []string{"bootstrap-credentials.txt", "data.key", "stratum.db"} {
		if mode := fileMode(t, filepath.Join(dir, name)); mode != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, mode)
		}
	}

	// Tamper with event 2 behind the founder's back.
	tamperAuditEvent(t, filepath.Join(dir, "stratum.db"), 2)
	r = stratum(t, "audit", "verify", "--data", dir)
	if r.code == 0 {
		t.Fatalf("audit verify passed a tampered chain: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "event 2") {
		t.Fatalf("audit verify does not name the tampered event 2: %q", r.stderr)
	}
}

// tamperAuditEvent rewrites the kind of audit event seq with bbolt directly.
func tamperAuditEvent(t *testing.T, path string, seq uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit")) // store.AuditBucket
		var key [8]byte
		binary.BigEndian.PutUint64(key[:], seq)
		var ev map[string]any
		if err := json.Unmarshal(b.Get(key[:]), &ev); err != nil {
			return err
		}
		ev["kind"] = "nothing.to.see"
		raw, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		return b.Put(key[:], raw)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A backup taken while the founder serves (and writes) restores into a
// new directory that verifies and serves the same data.
func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dirA := filepath.Join(tmp, "a")
	f := stratumtest.ServeDev(t, dirA)
	email, password := credentials(t, dirA)
	admin := f.Login(t, email, password).Token
	var before []apiToken
	for i := 0; i < 3; i++ {
		tok, status, err := createToken(f, admin, "before-backup")
		if err != nil || status != 201 {
			t.Fatalf("create token: %d %v", status, err)
		}
		before = append(before, tok)
	}

	// Keep writing while the backup runs.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, status, err := createToken(f, admin, "during-backup"); err != nil || status != 201 {
				return
			}
		}
	}()
	snap := filepath.Join(tmp, "snap.zst")
	r := stratum(t, "backup", "--data", dirA, "--out", snap)
	cancel()
	wg.Wait()
	if r.code != 0 || !strings.Contains(r.stdout, "running founder") {
		t.Fatalf("backup while serving = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if mode := fileMode(t, snap); mode != 0o600 {
		t.Errorf("snapshot mode %v, want 0600", mode)
	}

	// A plain backup carries no data key: the directory's own key checks
	// its MAC and opens it, and its ca.pem names the cluster expected.
	dirB := filepath.Join(tmp, "b")
	if r := stratum(t, "restore", "--data", dirB, "--in", snap); r.code == 0 || !strings.Contains(r.stderr, "carries no data key") {
		t.Fatalf("restore of a plain backup with no key = %d %q, want a refusal", r.code, r.stderr)
	}
	if err := os.MkdirAll(dirB, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data.key", "ca.pem"} {
		b, err := os.ReadFile(filepath.Join(dirA, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirB, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if r := stratum(t, "restore", "--data", dirB, "--in", snap); r.code != 0 {
		t.Fatalf("restore = %d %q", r.code, r.stderr)
	}
	if r := stratum(t, "restore", "--data", dirB, "--in", snap); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("restore over a store = %d %q, want a refusal", r.code, r.stderr)
	}
	if r := stratum(t, "audit", "verify", "--data", dirB); r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Fatalf("audit verify of the restored store = %d %q %q", r.code, r.stdout, r.stderr)
	}

	// The restored founder opens its sealed CA key and serves the same data.
	fB := stratumtest.ServeDev(t, dirB)
	ids := tokenIDs(t, fB, fB.Login(t, email, password).Token)
	for _, tok := range before {
		if !ids[tok.ID] {
			t.Errorf("token %s created before the backup is missing from the restore", tok.ID)
		}
	}
	if code, _ := fB.Stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Errorf("restored founder exit %d", code)
	}
	if code, _ := f.Stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Errorf("founder exit %d", code)
	}

	// Offline, the backup reads the file itself.
	snap2 := filepath.Join(tmp, "snap2.zst")
	if r := stratum(t, "backup", "--data", dirA, "--out", snap2); r.code != 0 || !strings.Contains(r.stdout, "backup written") {
		t.Fatalf("offline backup = %d %q %q", r.code, r.stdout, r.stderr)
	}
	// An existing file is kept unless --force (SPEC 18).
	prev, _ := os.ReadFile(snap2)
	if r := stratum(t, "backup", "--data", dirA, "--out", snap2); r.code != 6 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("backup over an existing file = %d %q, want 6 (refused: help exit-codes) and a refusal naming --force", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(snap2); !bytes.Equal(prev, after) {
		t.Fatal("a refused backup changed the existing file")
	}
	if r := stratum(t, "backup", "--data", dirA, "--out", snap2, "--force"); r.code != 0 {
		t.Fatalf("backup --force = %d %q", r.code, r.stderr)
	}
	// A missing data directory is named once.
	missing := filepath.Join(tmp, "nonexistent")
	if r := stratum(t, "backup", "--data", missing, "--out", filepath.Join(tmp, "x.zst")); r.code == 0 || strings.Count(r.stderr, missing) != 1 {
		t.Fatalf("backup of a missing directory = %d %q, want the path named once", r.code, r.stderr)
	}
}

// caPin is "sha256:" + hex SHA-256 of the certificate's SubjectPublicKeyInfo.
func caPin(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s is not PEM", path)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}
