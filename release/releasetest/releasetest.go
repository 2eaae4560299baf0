// Package releasetest builds signed release trees (and the readers and
// checks their tests share), for the tests of the packages that read
// releases; storetest opens the store they import into. It is imported
// by tests only.
package releasetest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"stratum/release"
)

// Key makes a key pair NAME.key/NAME.pub in dir and returns the private
// key file, the public key file and the key id.
func Key(t testing.TB, dir, name string) (keyFile, pubFile, id string) {
	t.Helper()
	out := filepath.Join(dir, name)
	id, err := release.Keygen(out)
	if err != nil {
		t.Fatal(err)
	}
	return out + ".key", out + ".pub", id
}

// Keyring trusts the given public key files.
func Keyring(t testing.TB, threshold int, pubFiles ...string) *release.Keyring {
	t.Helper()
	var keys []ed25519.PublicKey
	for _, p := range pubFiles {
		k, err := release.LoadPublicKey(p)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	k, err := release.NewKeyring(threshold, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// RandomBytes returns n reproducible pseudo-random bytes (ChaCha8: fast,
// and no two chunks alike, so a misplaced chunk cannot pass a check).
func RandomBytes(n int, seed byte) []byte {
	var s [32]byte
	s[0] = seed
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

// WriteFile writes data at the slash-separated rel under root.
func WriteFile(t testing.TB, root, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// MakeTree writes a release tree whose blob has blobSize bytes, and a few
// small files, an empty one and a sysext image of 3 chunks and 17 bytes
// with a root hash sidecar. It returns the directory and the blob's
// manifest path.
func MakeTree(t testing.TB, blobSize int) (dir, blobPath string) {
	t.Helper()
	dir = t.TempDir()
	blob := RandomBytes(blobSize, 1)
	sum := sha256.Sum256(blob)
	blobPath = "os/blobs/sha256/" + hex.EncodeToString(sum[:])
	WriteFile(t, dir, blobPath, blob)
	WriteFile(t, dir, "os/index.json", []byte(`{"layers":1}`))
	WriteFile(t, dir, "os/empty", nil)
	WriteFile(t, dir, SysextPath, RandomBytes(3<<20+17, 2))
	WriteFile(t, dir, "sysext/stratum-ovs_3.5.3-5.el10s.roothash", []byte(strings.Repeat("ab", 32)+"\n"))
	return dir, blobPath
}

// SysextPath is the sysext image MakeTree writes.
const SysextPath = "sysext/stratum-ovs_3.5.3-5.el10s.raw"

// SignedTree makes a tree signed by a fresh key for rel (upgrading from
// 0.5.0) and returns it with the public key file.
func SignedTree(t testing.TB, blobSize int, rel string) (dir, blobPath, pubFile string) {
	t.Helper()
	dir, blobPath = MakeTree(t, blobSize)
	keyFile, pubFile, _ := Key(t, t.TempDir(), "k1")
	if _, err := release.Sign(dir, keyFile, rel, []string{"0.5.0"}); err != nil {
		t.Fatal(err)
	}
	return dir, blobPath, pubFile
}

// FlipByte inverts one byte of a file, making it writable first when it
// is an imported (read-only) file.
func FlipByte(t testing.TB, path string, off int64) {
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

// WaitGoroutines fails the test when the goroutine count does not come
// back to baseline: a serving path that leaks one per request would
// exhaust a long-running founder.
func WaitGoroutines(t testing.TB, baseline int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= baseline {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, baseline %d:\n%s", n, baseline, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MustContain fails the test unless err says each of wants.
func MustContain(t testing.TB, err error, wants ...string) {
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

// StallingDialer dials with a small fixed receive buffer (no autotuning):
// a client that stops reading then stalls the server's writes after a few
// MiB, whatever the machine's TCP limits, so the read really holds its
// slot.
func StallingDialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		return errors.Join(err, serr)
	}}).DialContext
}

// UnreadableSources makes, under base, a path of each kind that cannot be
// read as a release tree: missing, a file, a FIFO, an empty and an
// unreadable directory, and a payload manifest that is a directory, a
// FIFO or a link out of the tree. An import must answer each the same way
// (no oracle on the disk) and at once (a FIFO must not block it).
func UnreadableSources(t testing.TB, base string) []string {
	t.Helper()
	at := func(name string, build func(p string) error) string {
		p := filepath.Join(base, name)
		if err := build(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	manifest := func(p string) string {
		if err := os.MkdirAll(filepath.Join(p, "payload"), 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(p, "payload", "manifest.json")
	}
	return []string{
		filepath.Join(base, "no-such-dir"),
		at("file", func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) }),
		at("fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }),
		at("empty", func(p string) error { return os.MkdirAll(p, 0o755) }),
		at("unreadable", func(p string) error { return os.MkdirAll(p, 0o000) }),
		at("manifest-dir", func(p string) error { return os.MkdirAll(manifest(p), 0o755) }),
		at("manifest-fifo", func(p string) error { return syscall.Mkfifo(manifest(p), 0o600) }),
		at("manifest-link", func(p string) error { return os.Symlink("/etc/shadow", manifest(p)) }),
		at("manifest-only", func(p string) error { return os.WriteFile(manifest(p), []byte("{}"), 0o644) }),
	}
}
