package tpm

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenNoTPM(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A socket file whose server is gone, as a crashed swtpm leaves it.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()

	for name, path := range map[string]string{
		"missing":      filepath.Join(dir, "tpmrm0"),
		"regular file": regular,
		"stale socket": stale,
	} {
		t.Run(name, func(t *testing.T) {
			tp, err := Open(path)
			if err == nil {
				tp.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrNoTPM) {
				t.Fatalf("Open error = %v, want ErrNoTPM", err)
			}
			t.Log(err)
		})
	}
}

func TestSealToFileWithoutTPM(t *testing.T) {
	out := filepath.Join(t.TempDir(), "unseal.tpm")
	err := SealToFile(filepath.Join(t.TempDir(), "no-tpm"), nil, testSecret, out)
	if !errors.Is(err, ErrNoTPM) {
		t.Fatalf("SealToFile error = %v, want ErrNoTPM", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SealToFile left %s behind", out)
	}
}
