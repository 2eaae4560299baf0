package crypto

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomicReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "openbao-unseal.tpm")
	for _, content := range []string{"first", "second"} {
		if err := WriteFileAtomic(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the blob (temp file left?)", len(entries))
	}
}

func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name   string
		size   int
		wantOK bool
	}{{"empty", 0, true}, {"at the limit", 64, true}, {"one byte over", 65, false}, {"far over", 1 << 20, false}} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			if err := os.WriteFile(p, make([]byte, tt.size), 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := ReadFileLimit(p, 64)
			if (err == nil) != tt.wantOK || (err == nil && len(b) != tt.size) {
				t.Fatalf("ReadFileLimit = %d bytes, %v", len(b), err)
			}
		})
	}
	if _, err := ReadFileLimit(filepath.Join(dir, "missing"), 64); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}
