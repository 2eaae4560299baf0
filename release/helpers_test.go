package release

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testKey makes a key pair NAME.key/NAME.pub in dir and returns the
// private key file, the public key file and the key id.
func testKey(t testing.TB, dir, name string) (keyFile, pubFile, id string) {
	t.Helper()
	out := filepath.Join(dir, name)
	id, err := Keygen(out)
	if err != nil {
		t.Fatal(err)
	}
	return out + ".key", out + ".pub", id
}

func testKeyring(t testing.TB, threshold int, pubFiles ...string) *Keyring {
	t.Helper()
	dir := t.TempDir()
	for _, p := range pubFiles {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := LoadKeyring(dir, threshold)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// randomBytes returns n reproducible pseudo-random bytes (ChaCha8: fast,
// and no two chunks alike, so a misplaced chunk cannot pass a check).
func randomBytes(n int, seed byte) []byte {
	var s [32]byte
	s[0] = seed
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

func writeFile(t testing.TB, root, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// makeTree writes a release tree whose blob has blobSize bytes, and a few
// small files, an empty one and a sysext image with a root hash sidecar.
// It returns the directory and the blob's manifest path.
func makeTree(t testing.TB, blobSize int) (dir, blobPath string) {
	t.Helper()
	dir = t.TempDir()
	blob := randomBytes(blobSize, 1)
	sum := sha256.Sum256(blob)
	blobPath = "os/blobs/sha256/" + hex.EncodeToString(sum[:])
	writeFile(t, dir, blobPath, blob)
	writeFile(t, dir, "os/index.json", []byte(`{"layers":1}`))
	writeFile(t, dir, "os/empty", nil)
	writeFile(t, dir, "sysext/stratum-ovs_3.5.3-5.el10s.raw", randomBytes(3<<20+17, 2))
	writeFile(t, dir, "sysext/stratum-ovs_3.5.3-5.el10s.roothash", []byte(strings.Repeat("ab", 32)+"\n"))
	return dir, blobPath
}

// flipByte inverts one byte of a file, making it writable first when it
// is an imported (read-only) file.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func mustContain(t testing.TB, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
}
