package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"stratum/internal/stratumtest"
)

// Issue 23: a restore brought the store but not releases/ or
// release-keys/, yet the restored founder listed its releases as verified
// and a joiner got RELEASE_CORRUPT forever; the banner named a credentials
// file that was never restored. A backup now carries the release keys and
// files; one made with --exclude-releases restores a founder that says
// which releases are missing and how to bring them back.
func TestRestoreIsComplete(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dirA := filepath.Join(tmp, "a")
	tree := stratumtest.SignedReleaseTree(t, "0.3.0", []string{"0.1.0"}, 1<<20+5)
	tree.Trust(t, dirA)
	f := stratumtest.ServeDev(t, dirA)
	email, password := credentials(t, dirA)
	admin := f.Login(t, email, password).Token
	if status, body, err := call(f, "POST", "/v1/admin/releases", admin, map[string]string{"path": tree.Dir}); err != nil || status != 201 {
		t.Fatalf("import: %d %s %v", status, body, err)
	}
	id, _ := age.GenerateX25519Identity()
	idFile := filepath.Join(tmp, "operator.key")
	os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600)
	full, lean := filepath.Join(tmp, "full.age"), filepath.Join(tmp, "lean.age")
	for out, extra := range map[string][]string{full: nil, lean: {"--exclude-releases"}} {
		args := append([]string{"backup", "--data", dirA, "--out", out, "--recipient", id.Recipient().String(), "--include-data-key"}, extra...)
		if r := stratum(t, args...); r.code != 0 {
			t.Fatalf("backup %v = %d %q", extra, r.code, r.stderr)
		}
	}
	pin := bannerPinOf(t, f)
	stopOK(t, f)

	releases := func(f *stratumtest.Founder, token string) (status string, missing []string, fix string) {
		t.Helper()
		_, raw, _ := call(f, "GET", "/v1/admin/releases", token, nil)
		var out struct {
			Releases []struct {
				Release, Status, Fix string
				Missing              []string
			}
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out.Releases) != 1 {
			t.Fatalf("releases: %s %v", raw, err)
		}
		r := out.Releases[0]
		return r.Status, r.Missing, r.Fix
	}

	// The full backup restores the release: its keys, its files, verified.
	dirB := filepath.Join(tmp, "b")
	if r := stratum(t, "restore", "--data", dirB, "--in", full, "--identity", idFile, "--ca-pin", pin); r.code != 0 || !strings.Contains(r.stdout, "of 1 release into") {
		t.Fatalf("restore = %d %q %q", r.code, r.stdout, r.stderr)
	}
	keys, err := os.ReadDir(filepath.Join(dirA, "release-keys"))
	if err != nil || len(keys) == 0 {
		t.Fatalf("founder A trusts no release key: %v", err)
	}
	for _, k := range keys {
		key := k.Name()
		a, _ := os.ReadFile(filepath.Join(dirA, "release-keys", key))
		if b, err := os.ReadFile(filepath.Join(dirB, "release-keys", key)); err != nil || !bytes.Equal(a, b) {
			t.Fatalf("the release key %s was not restored: %v", key, err)
		}
	}
	fB := stratumtest.ServeDev(t, dirB)
	if strings.Contains(fB.Stdout(), "bootstrap-credentials.txt") {
		t.Errorf("the banner names a credentials file that does not exist:\n%s", fB.Stdout())
	}
	tokB := fB.Login(t, email, password).Token
	waitUntil(t, "0.3.0 verified on B", func() bool { s, _, _ := releases(fB, tokB); return s == "verified" })
	// B still trusts the restored keys: their records came with the store
	// (SPEC 16.2), not only the files.
	var keysB struct {
		Keys []struct {
			File    string
			Trusted bool
		}
	}
	if status, raw, err := call(fB, "GET", "/v1/admin/release-keys", tokB, nil); err != nil || status != 200 || json.Unmarshal(raw, &keysB) != nil || len(keysB.Keys) != len(keys) {
		t.Fatalf("release keys on B: %d %s %v", status, raw, err)
	}
	for _, k := range keysB.Keys {
		if !k.Trusted {
			t.Fatalf("restored key %s is not trusted on B: %+v", k.File, keysB.Keys)
		}
	}
	stopOK(t, fB)

	// Without the release files: missing, with the command that fixes it.
	dirC := filepath.Join(tmp, "c")
	if r := stratum(t, "restore", "--data", dirC, "--in", lean, "--identity", idFile, "--ca-pin", pin); r.code != 0 {
		t.Fatalf("restore = %d %q", r.code, r.stderr)
	}
	fC := stratumtest.ServeDev(t, dirC)
	tokC := fC.Login(t, email, password).Token
	waitUntil(t, "0.3.0 missing on C", func() bool { s, _, _ := releases(fC, tokC); return s == "missing" })
	status, missing, fix := releases(fC, tokC)
	if len(missing) == 0 || !strings.Contains(fix, "stratum release import") {
		t.Fatalf("0.3.0 on C: %s, missing %v, fix %q", status, missing, fix)
	}
	_, metrics, _ := call(fC, "GET", "/metrics", "", nil)
	if !strings.Contains(string(metrics), `stratum_releases{status="missing"} 1`) {
		t.Errorf("metrics do not count the missing release")
	}
	// Re-importing the same signed tree brings it back.
	if status, body, err := call(fC, "POST", "/v1/admin/releases", tokC, map[string]string{"path": tree.Dir}); err != nil || status != 201 {
		t.Fatalf("re-import: %d %s %v", status, body, err)
	}
	if s, _, _ := releases(fC, tokC); s != "verified" {
		t.Fatalf("after the re-import 0.3.0 is %s", s)
	}
	stopOK(t, fC)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
