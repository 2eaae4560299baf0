package stratumtest

import (
	"os"
	"path/filepath"
	"testing"

	"stratum/release"
	"stratum/release/releasetest"
	"stratum/wire"
)

// ReleaseTree is a signed release tree on disk.
type ReleaseTree struct {
	Dir     string // the tree
	Blob    string // manifest path of its large file
	PubFile string // the signer's public key (NAME.pub)
	KeyID   string // the signer's key id
}

// SignedReleaseTree writes a release tree whose blob has blobSize bytes
// and signs it as rel (upgrading from upgradesFrom) with a new key.
func SignedReleaseTree(t testing.TB, rel string, upgradesFrom []string, blobSize int) ReleaseTree {
	t.Helper()
	dir, blob := releasetest.MakeTree(t, blobSize)
	keyFile, pubFile, id := releasetest.Key(t, t.TempDir(), "release")
	if _, err := release.Sign(dir, keyFile, rel, upgradesFrom); err != nil {
		t.Fatal(err)
	}
	return ReleaseTree{Dir: dir, Blob: blob, PubFile: pubFile, KeyID: id}
}

// Trust puts the tree's public key in the founder data directory's
// release keys, named by its key id (the keys of other trees stay), for a
// founder that has not started yet: its first start adopts the files
// there (SPEC 16.2). A running founder trusts a key through its API:
// TrustOn.
func (r ReleaseTree) Trust(t testing.TB, dataDir string) {
	t.Helper()
	pub, err := os.ReadFile(r.PubFile)
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dataDir, "release-keys")
	if err := os.MkdirAll(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, r.KeyID[:16]+".pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReleaseKey is a release signing key made by the binary, as an
// operator makes one (`stratum release keygen`).
type ReleaseKey struct {
	Key, Pub string // the private and the public key file
}

// NewReleaseKey makes the key dir/release (dir is created, 0700).
func NewReleaseKey(t testing.TB, dir string) ReleaseKey {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	MustRun(t, "release", "keygen", "--out", filepath.Join(dir, "release"))
	return ReleaseKey{Key: filepath.Join(dir, "release.key"), Pub: filepath.Join(dir, "release.pub")}
}

// CopyPub copies the public key into dir (created) as release.pub, the
// keys a verifier holds, and returns dir.
func (k ReleaseKey) CopyPub(t testing.TB, dir string) string {
	t.Helper()
	pub, err := os.ReadFile(k.Pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "release.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Trust puts the public key in the founder data directory's release
// keys, for a founder that has not started yet (see ReleaseTree.Trust).
func (k ReleaseKey) Trust(t testing.TB, dataDir string) {
	t.Helper()
	k.CopyPub(t, filepath.Join(dataDir, "release-keys"))
}

// TrustOn trusts the tree's key on the running founder f, as its
// operator through the admin API (stratum release trust-key's request),
// named by its key id.
func (r ReleaseTree) TrustOn(t testing.TB, f *Founder) {
	t.Helper()
	trustOn(t, f, r.PubFile, r.KeyID[:16]+".pub")
}

// TrustOn trusts the key on the running founder f as release.pub (see
// ReleaseTree.TrustOn).
func (k ReleaseKey) TrustOn(t testing.TB, f *Founder) {
	t.Helper()
	trustOn(t, f, k.Pub, "release.pub")
}

func trustOn(t testing.TB, f *Founder, pubFile, name string) {
	t.Helper()
	pem, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	f.Operator(t).Must(t, "POST", "/v1/admin/release-keys", wire.TrustReleaseKey{Name: name, PublicKey: string(pem)}, 201, nil)
}
