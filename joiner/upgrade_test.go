package joiner

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
	"stratum/release"
)

// releaseFixture is a signed release tree as a mirror publishes it.
type releaseFixture struct {
	dir      string // the tree
	trusted  string // a --release-keys dir trusting its signer
	keyID    string // the signer
	big      string // a 3 MiB file, the one cut mid-transfer
	small    string // a sysext image
	manifest *release.Manifest
}

func makeRelease(t *testing.T, rel string) *releaseFixture {
	t.Helper()
	dir := t.TempDir()
	big := make([]byte, 3<<20+777)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(big)
	fx := &releaseFixture{dir: dir, big: "os/blobs/sha256/" + hex.EncodeToString(sum[:]), small: "sysext/stratum-ovs_3.5.3.raw"}
	files := map[string][]byte{
		fx.big:           big,
		fx.small:         []byte(strings.Repeat("sysext image ", 5000)),
		"os/config.json": []byte(`{"image":"v` + rel + `"}`),
		"os/empty":       {},
	}
	for p, b := range files {
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keys := t.TempDir()
	id, err := release.Keygen(filepath.Join(keys, "signer"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := release.Sign(dir, filepath.Join(keys, "signer.key"), rel, []string{"0.5.0"})
	if err != nil {
		t.Fatal(err)
	}
	fx.keyID, fx.manifest = id, res.Manifest
	fx.trusted = t.TempDir()
	pub, err := os.ReadFile(filepath.Join(keys, "signer.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fx.trusted, "signer.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return fx
}

// hookScript writes an executable hook that records its arguments, the
// files of the tree it was given and its environment in out, then runs
// tail (shell lines) to decide how it ends.
func hookScript(t *testing.T, out, tail string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "upgrade-hook")
	script := "#!/bin/sh\nset -e\n" +
		`echo "$1" > "` + out + `/tree"` + "\n" +
		`echo "$2" > "` + out + `/release"` + "\n" +
		`echo "$STRATUM_JOIN_RELEASE_FILE" > "` + out + `/releasefile"` + "\n" +
		`cd "$1" && find . -type f | sort > "` + out + `/files"` + "\n" + tail + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// upgradeConfig is a joiner on 0.5.0 with self-upgrade, against a founder
// on 0.6.0 serving fx, which approves, delivers and joins after the
// re-registration.
func upgradeConfig(t *testing.T, f *fakefounder.Founder, fx *releaseFixture, hook string, out *syncbuf.Buffer) Config {
	t.Helper()
	f.ReleaseDir = fx.dir
	delivery, _ := f.Delivery(t, "n-abc12def", "")
	f.AcceptOn("reregistered", delivery)
	cfg := testConfig(t, f, out)
	cfg.Release = "0.5.0"
	cfg.SelfUpgrade = true
	cfg.UpgradeHook = hook
	cfg.ReleaseKeys = fx.trusted
	return cfg
}

func TestSelfUpgrade(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	fx := makeRelease(t, "0.6.0")
	const cut = 1<<20 + 12345
	f.BusyOnce[fx.small] = true
	f.CutOnce[fx.big] = cut
	hookOut := t.TempDir()
	var out syncbuf.Buffer
	cfg := upgradeConfig(t, f, fx, hookScript(t, hookOut, `cp -r "$1" "`+hookOut+`/tree-copy"; exit 0`), &out)
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	o := out.String()
	for _, want := range []string{"state: needs-upgrade: this machine runs 0.5.0, the cluster 0.6.0; upgrading from the founder",
		"manifest of release 0.6.0 verified", "RELEASE_BUSY", "retrying in 1s", "connection lost after",
		"downloaded and verified " + fx.big, "the upgrade hook succeeded", "upgraded from 0.5.0 to 0.6.0",
		"state: pending", "state: joined"} {
		contains(t, o, want)
	}

	// The hook got the verified tree and the release, and the tree holds
	// exactly the payload and the manifest's files, byte for byte.
	tree := filepath.Join(cfg.StateDir, "releases", "0.6.0")
	if got := strings.TrimSpace(readFile(t, hookOut, "tree")); got != tree {
		t.Errorf("hook tree %q, want %q", got, tree)
	}
	if got := strings.TrimSpace(readFile(t, hookOut, "release")); got != "0.6.0" {
		t.Errorf("hook release %q", got)
	}
	if got := strings.TrimSpace(readFile(t, hookOut, "releasefile")); got != filepath.Join(cfg.StateDir, "release") {
		t.Errorf("hook STRATUM_JOIN_RELEASE_FILE %q", got)
	}
	want := []string{"./" + release.ManifestPath, "./" + release.SignaturePath}
	for _, fl := range fx.manifest.Files {
		want = append(want, "./"+fl.Path)
	}
	slices.Sort(want)
	if got := strings.Fields(readFile(t, hookOut, "files")); !slices.Equal(got, want) {
		t.Errorf("hook saw files %v, want %v", got, want)
	}
	if _, err := release.Verify(filepath.Join(hookOut, "tree-copy"), mustKeyring(t, fx.trusted)); err != nil {
		t.Errorf("the tree handed to the hook does not verify: %v", err)
	}
	// Once installed, the release's files are removed (SPEC 17).
	if _, err := os.Stat(tree); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the installed release's files are left in %s: %v", tree, err)
	}

	// The cut file resumed where it stopped, conditionally on its ETag.
	reqs := f.RequestsFor(fx.big)
	if len(reqs) != 2 {
		t.Fatalf("%d requests for the cut file, want 2: %+v", len(reqs), reqs)
	}
	if reqs[0].RangeHdr != "" {
		t.Errorf("the first request had Range %q", reqs[0].RangeHdr)
	}
	sum := sha256.Sum256(mustRead(t, filepath.Join(fx.dir, fx.big)))
	if reqs[1].RangeHdr != fmt.Sprintf("bytes=%d-", cut) || reqs[1].IfRange != `"sha256:`+hex.EncodeToString(sum[:])+`"` {
		t.Errorf("resume request: Range %q If-Range %q, want bytes=%d- and the ETag", reqs[1].RangeHdr, reqs[1].IfRange, cut)
	}
	if n := len(f.RequestsFor(fx.small)); n != 2 {
		t.Errorf("%d requests for the busy file, want 2 (503 then 200)", n)
	}

	// The new release is recorded, and the re-registration carried it.
	if got := readFile(t, cfg.StateDir, "release"); got != "0.6.0\n" {
		t.Errorf("release file %q", got)
	}
	if len(f.Registers) != 2 || f.Registers[1]["release"] != "0.6.0" {
		t.Errorf("registrations %v, want a second one with release 0.6.0", f.Registers)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "downloads", "0.6.0")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("partial downloads left behind: %v", err)
	}
}

func TestUpgradeUnknownKeyRefused(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	fx := makeRelease(t, "0.6.0")
	other := makeRelease(t, "0.6.0") // its trusted dir holds another key
	hookOut := t.TempDir()
	var out syncbuf.Buffer
	cfg := upgradeConfig(t, f, fx, hookScript(t, hookOut, "exit 0"), &out)
	cfg.ReleaseKeys = other.trusted
	err := runJoiner(t, cfg)
	if err == nil || ExitCode(err) != 1 {
		t.Fatalf("want an error (exit 1), got %v", err)
	}
	if !strings.Contains(err.Error(), "untrusted key "+fx.keyID) {
		t.Errorf("the error does not name the signing key %s: %v", fx.keyID, err)
	}
	if _, err := os.Stat(filepath.Join(hookOut, "tree")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the hook ran on an untrusted release")
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, r := range f.ReleaseReqs {
		if r.Path != release.ManifestPath && r.Path != release.SignaturePath {
			t.Errorf("fetched %s before the manifest was trusted", r.Path)
		}
	}
}

func TestUpgradeTamperedFileRefused(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	fx := makeRelease(t, "0.6.0")
	f.Tamper[fx.big] = true
	hookOut := t.TempDir()
	var out syncbuf.Buffer
	cfg := upgradeConfig(t, f, fx, hookScript(t, hookOut, "exit 0"), &out)
	err := runJoiner(t, cfg)
	if err == nil || !strings.Contains(err.Error(), fx.big) || !strings.Contains(err.Error(), "fails verification") {
		t.Fatalf("want a verification error naming %s, got %v", fx.big, err)
	}
	if _, err := os.Stat(filepath.Join(hookOut, "tree")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the hook ran on a tampered release")
	}
	for _, p := range []string{
		filepath.Join(cfg.StateDir, "releases", "0.6.0", filepath.FromSlash(fx.big)),
		filepath.Join(cfg.StateDir, "downloads", "0.6.0", filepath.FromSlash(fx.big)) + ".partial",
	} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after the mismatch", p)
		}
	}
	// The registration recorded the release it was accepted with; the
	// new one is recorded only once the hook switched the machine.
	if v, _ := readReleaseFile(cfg.StateDir); v != cfg.Release {
		t.Errorf("a release was recorded: %q, want %q", v, cfg.Release)
	}
}

// TestUpgradeAfterHookFailure: the first hook fails (its stderr is in
// the error); the rerun re-checks the verified files without downloading
// them again and runs the hook again.
func TestUpgradeAfterHookFailure(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	fx := makeRelease(t, "0.6.0")
	hookOut := t.TempDir()
	var out syncbuf.Buffer
	cfg := upgradeConfig(t, f, fx, hookScript(t, hookOut, "echo 'bootc: no space left on device' >&2; exit 7"), &out)
	err := runJoiner(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("want the hook's failure with its stderr, got %v", err)
	}
	// The registration recorded the release it was accepted with; the
	// new one is recorded only once the hook switched the machine.
	if v, _ := readReleaseFile(cfg.StateDir); v != cfg.Release {
		t.Errorf("a failed hook recorded the release: %q, want %q", v, cfg.Release)
	}
	f.Mu.Lock()
	before := len(f.ReleaseReqs)
	f.Mu.Unlock()
	// A verified file damaged on disk meanwhile (same size) is caught by
	// the re-check and fetched again; the others are not.
	damaged := filepath.Join(cfg.StateDir, "releases", "0.6.0", filepath.FromSlash(fx.small))
	b := mustRead(t, damaged)
	b[0] ^= 1
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}

	cfg.UpgradeHook = hookScript(t, hookOut, "exit 0")
	var out2 syncbuf.Buffer
	cfg.Out = &out2
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("rerun: %v\n%s", err, out2.String())
	}
	contains(t, out2.String(), "picking up registration j-test0001")
	contains(t, out2.String(), "already verified "+fx.big)
	f.Mu.Lock()
	after := f.ReleaseReqs[before:]
	f.Mu.Unlock()
	for _, r := range after {
		if r.Path != release.ManifestPath && r.Path != release.SignaturePath && r.Path != fx.small {
			t.Errorf("the rerun downloaded %s again", r.Path)
		}
	}
	contains(t, out2.String(), fx.small+" in "+filepath.Dir(filepath.Dir(damaged)))
	contains(t, out2.String(), "downloaded and verified "+fx.small)
}

// TestUpgradeHookRebooted: a hook that records the release and reboots
// (never returning: here, it dies) leaves a machine whose next start only
// re-registers, even though its unit still says --release 0.5.0.
func TestUpgradeHookRebooted(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	fx := makeRelease(t, "0.6.0")
	hookOut := t.TempDir()
	var out syncbuf.Buffer
	cfg := upgradeConfig(t, f, fx, hookScript(t, hookOut, `echo "$2" > "$STRATUM_JOIN_RELEASE_FILE"; kill -9 $$`), &out)
	if err := runJoiner(t, cfg); err == nil {
		t.Fatal("a hook killed mid-way reported success")
	}
	cfg.UpgradeHook = hookScript(t, hookOut, "echo 'must not run again' >&2; exit 1")
	var out2 syncbuf.Buffer
	cfg.Out = &out2
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("after the reboot: %v\n%s", err, out2.String())
	}
	contains(t, out2.String(), "using release 0.6.0 recorded by a past self-upgrade")
	contains(t, out2.String(), "state: joined")
	if strings.Contains(out2.String(), "running the upgrade hook") {
		t.Error("the hook ran again after the release was recorded")
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "releases", "0.6.0")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the release installed before the reboot is left behind: %v", err)
	}
}

func TestUpgradeFromMirror(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	fx := makeRelease(t, "0.6.0")
	mirror := httptest.NewTLSServer(http.StripPrefix("/stratum/0.6.0/", http.FileServer(http.Dir(fx.dir))))
	t.Cleanup(mirror.Close)
	f.Source = mirror.URL + "/stratum/0.6.0"
	hookOut := t.TempDir()
	var out syncbuf.Buffer
	cfg := upgradeConfig(t, f, fx, hookScript(t, hookOut, "exit 0"), &out)
	cfg.mirrorHTTP = mirror.Client()
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	contains(t, out.String(), "fetching release 0.6.0 from "+f.Source)
	if len(f.ReleaseReqs) != 0 {
		t.Errorf("the founder was asked for %d release files with a mirror configured", len(f.ReleaseReqs))
	}
	if got := strings.TrimSpace(readFile(t, hookOut, "release")); got != "0.6.0" {
		t.Errorf("hook release %q", got)
	}
}

func mustKeyring(t *testing.T, dir string) *release.Keyring {
	t.Helper()
	k, err := release.LoadKeyring(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
