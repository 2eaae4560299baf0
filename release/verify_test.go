package release_test

import (
	"bytes"
	"os"
	"path/filepath"
	"stratum/release"
	"stratum/release/releasetest"
	"testing"
	"time"
)

// TestRoundTrip: keygen, sign, verify on a tree with a 64 MiB blob, then
// each kind of damage fails verification with a message naming the file
// or the key.
func TestRoundTrip(t *testing.T) {
	dir, blob := releasetest.MakeTree(t, 64<<20)
	keys := t.TempDir()
	k1, p1, id1 := releasetest.Key(t, keys, "k1")
	k2, p2, _ := releasetest.Key(t, keys, "k2")
	k3, _, id3 := releasetest.Key(t, keys, "k3")

	start := time.Now()
	res, err := release.Sign(dir, k1, "0.6.0", []string{"0.5.0", "0.5.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sign (64 MiB): %s", time.Since(start))
	if res.Signatures != 1 || !res.Rewrote || res.KeyID != id1 {
		t.Fatalf("sign result %+v", res)
	}
	m := res.Manifest
	if len(m.Files) != 5 || len(m.Sysext) != 1 {
		t.Fatalf("manifest files %d sysext %d", len(m.Files), len(m.Sysext))
	}
	if s := m.Sysext[0]; s.Name != "stratum-ovs" || s.Version != "3.5.3-5.el10s" || s.RootHash != string(bytes.Repeat([]byte("ab"), 32)) {
		t.Fatalf("sysext %+v", s)
	}
	if m.OS.ImageVersion != "v0.6.0" || len(m.OS.Layout) != 8 {
		t.Fatalf("os %+v", m.OS)
	}

	ring1 := releasetest.Keyring(t, 1, p1)
	start = time.Now()
	got, err := release.Verify(dir, ring1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("verify (64 MiB): %s", time.Since(start))
	if got.Release != "0.6.0" || got.TotalSize() != m.TotalSize() {
		t.Fatalf("verified %+v", got)
	}

	ring2 := releasetest.Keyring(t, 2, p1, p2)
	_, err = release.Verify(dir, ring2)
	releasetest.MustContain(t, err, release.SignaturePath, "1 valid signature(s) by trusted keys, 2 needed")

	manifestBefore, _ := os.ReadFile(filepath.Join(dir, release.ManifestPath))
	res, err = release.Sign(dir, k2, "0.6.0", []string{"0.5.0", "0.5.1"})
	if err != nil {
		t.Fatal(err)
	}
	manifestAfter, _ := os.ReadFile(filepath.Join(dir, release.ManifestPath))
	if res.Signatures != 2 || res.Rewrote || !bytes.Equal(manifestBefore, manifestAfter) {
		t.Fatalf("second signature: %+v, manifest kept: %v", res, bytes.Equal(manifestBefore, manifestAfter))
	}
	if _, err := release.Verify(dir, ring2); err != nil {
		t.Fatalf("threshold 2 with two signatures: %v", err)
	}

	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	aside := t.TempDir() // outside the tree, where a moved file is not an extra one
	a := func(name string) string { return filepath.Join(aside, name) }
	cases := []struct {
		name           string
		break_, repair func()
		ring           *release.Keyring
		wants          []string
	}{
		{"flipped byte", func() { releasetest.FlipByte(t, p(blob), 40<<20) }, func() { releasetest.FlipByte(t, p(blob), 40<<20) },
			ring1, []string{blob, "sha256"}},
		{"missing file", func() { os.Rename(p("os/index.json"), a("index")) }, func() { os.Rename(a("index"), p("os/index.json")) },
			ring1, []string{"os/index.json", "missing"}},
		{"extra file", func() { releasetest.WriteFile(t, dir, "os/extra.txt", []byte("x")) }, func() { os.Remove(p("os/extra.txt")) },
			ring1, []string{"os/extra.txt", "not listed"}},
		{"symlink", func() { os.Symlink("/etc/passwd", p("sysext/link.raw")) }, func() { os.Remove(p("sysext/link.raw")) },
			ring1, []string{"sysext/link.raw", "symbolic link"}},
		{"grown file", func() { releasetest.WriteFile(t, dir, "os/empty", []byte("!")) }, func() { releasetest.WriteFile(t, dir, "os/empty", nil) },
			ring1, []string{"os/empty", "size 1 bytes, manifest says 0"}},
		{"manifest altered", func() {
			os.WriteFile(p(release.ManifestPath), bytes.Replace(manifestBefore, []byte(`"0.5.1"`), []byte(`"0.4.0"`), 1), 0o644)
		}, func() { os.WriteFile(p(release.ManifestPath), manifestBefore, 0o644) },
			ring1, []string{release.SignaturePath, id1, "does not verify"}},
		{"untrusted key", func() {
			os.Rename(p(release.SignaturePath), a("sig"))
			if _, err := release.Sign(dir, k3, "0.6.0", []string{"0.5.0", "0.5.1"}); err != nil {
				t.Fatal(err)
			}
		}, func() { os.Rename(a("sig"), p(release.SignaturePath)) },
			ring1, []string{release.SignaturePath, "untrusted key " + id3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.break_()
			_, err := release.Verify(dir, c.ring)
			c.repair()
			releasetest.MustContain(t, err, c.wants...)
			if path, reason, ok := release.BadFile(err); !ok || path == "" || reason == "" {
				t.Fatalf("BadFile(%v) = %q, %q, %v", err, path, reason, ok)
			}
			if _, err := release.Verify(dir, ring2); err != nil {
				t.Fatalf("after repair: %v", err)
			}
		})
	}
}

func TestSignRewritesChangedTree(t *testing.T) {
	dir, _ := releasetest.MakeTree(t, 1000)
	keys := t.TempDir()
	k1, p1, _ := releasetest.Key(t, keys, "k1")
	k2, p2, _ := releasetest.Key(t, keys, "k2")
	if _, err := release.Sign(dir, k1, "0.6.0", nil); err != nil {
		t.Fatal(err)
	}
	if res, err := release.Sign(dir, k1, "0.6.0", nil); err != nil || res.Signatures != 1 || res.Rewrote {
		t.Fatalf("re-sign by the same key: %+v %v", res, err)
	}
	releasetest.WriteFile(t, dir, "os/new", []byte("new"))
	res, err := release.Sign(dir, k2, "0.6.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Rewrote || res.Dropped != 1 || res.Signatures != 1 {
		t.Fatalf("changed tree: %+v", res)
	}
	if _, err := release.Verify(dir, releasetest.Keyring(t, 1, p2)); err != nil {
		t.Fatal(err)
	}
	_, err = release.Verify(dir, releasetest.Keyring(t, 1, p1))
	releasetest.MustContain(t, err, "untrusted key")
}

func TestSignRefuses(t *testing.T) {
	dir, _ := releasetest.MakeTree(t, 10)
	k1, _, _ := releasetest.Key(t, t.TempDir(), "k1")
	if _, err := release.Sign(dir, k1, "v0.6.0", nil); err == nil {
		t.Fatal("release v0.6.0 accepted")
	}
	if _, err := release.Sign(dir, k1, "0.6.0", []string{"latest"}); err == nil {
		t.Fatal("upgradesFrom latest accepted")
	}
	os.Chmod(k1, 0o644)
	_, err := release.Sign(dir, k1, "0.6.0", nil)
	releasetest.MustContain(t, err, "chmod 600")
	os.Chmod(k1, 0o600)
	os.Symlink("/etc", filepath.Join(dir, "os", "etc"))
	_, err = release.Sign(dir, k1, "0.6.0", nil)
	releasetest.MustContain(t, err, "os/etc", "symbolic link")
}

func TestKeys(t *testing.T) {
	dir := t.TempDir()
	_, p1, id1 := releasetest.Key(t, dir, "a")
	if _, err := release.Keygen(filepath.Join(dir, "a")); err == nil {
		t.Fatal("keygen overwrote a key")
	}
	pub, err := release.LoadPublicKey(p1)
	if err != nil || release.KeyID(pub) != id1 {
		t.Fatalf("public key: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "a.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", st.Mode())
	}
	if _, err := release.NewKeyring(2, pub, pub); err == nil {
		t.Fatal("threshold 2 with one distinct key accepted")
	}
	if _, err := release.NewKeyring(0, pub); err == nil {
		t.Fatal("threshold 0 accepted")
	}
	ring, err := release.LoadKeyring(dir, 0) // dir holds a.pub (and a.key)
	if err != nil || ring.Threshold() != 1 || len(ring.KeyIDs()) != 1 {
		t.Fatalf("keyring %v %v", ring.Threshold(), ring.KeyIDs())
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "x.pub"), []byte("not a key"), 0o644)
	_, err = release.LoadKeyring(bad, 1)
	releasetest.MustContain(t, err, "x.pub")
	_, err = release.LoadKeyring(t.TempDir(), 1)
	releasetest.MustContain(t, err, "no *.pub")
}
