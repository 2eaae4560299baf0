package repo

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/internal/pgtest"
	"stratum/release/releasetest"
	"stratum/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// replica opens the shared database with its own data directory.
func replica(t *testing.T, dsn string) (*store.DB, string) {
	t.Helper()
	key, err := crypto.NewDataKey(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dsn, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, t.TempDir()
}

func readAll(t *testing.T, m *Mirror, rel, p string) ([]byte, error) {
	t.Helper()
	fi, err := m.Stat(rel, p)
	if err != nil {
		return nil, err
	}
	rd, err := m.Open("t", fi)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(io.NewSectionReader(rd, 0, rd.Size()))
}

// On a shared store a release imported on one replica is served by
// another from its cache, filled from the store and verified; a
// re-import replaces what every replica serves; content damaged in the
// store is refused and marked corrupt.
func TestSharedReleases(t *testing.T) {
	dsn := pgtest.DSN(t)
	src, blob, pub := releasetest.SignedTree(t, 2*ChunkSize+333, "0.6.0")
	keys := releasetest.Keyring(t, 1, pub)
	dbA, dirA := replica(t, dsn)
	dbB, dirB := replica(t, dsn)
	if _, err := Import(context.Background(), dbA, dirA, src, keys, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(src, blob))
	if err != nil {
		t.Fatal(err)
	}
	mB := NewMirror(MirrorConfig{DB: dbB, DataDir: dirB})
	t.Cleanup(mB.Close)
	if _, err := os.Stat(filepath.Join(dirB, "releases", "0.6.0")); err == nil {
		t.Fatal("replica B has an imported tree it never imported")
	}
	got, err := readAll(t, mB, "0.6.0", blob)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("B serves %d bytes (%v), want the %d imported on A", len(got), err, len(want))
	}
	rec, _, _ := Get(dbB, "0.6.0", nil)
	cached := filepath.Join(dirB, cacheDirName, rec.ImportID, filepath.FromSlash(blob))
	if st, err := os.Stat(cached); err != nil || st.Size() != int64(len(want)) {
		t.Fatalf("B's cache file: %v %v", st, err)
	}
	if !mB.Offered("0.6.0") {
		t.Fatal("B does not offer the release A imported")
	}

	// A re-import (here: another tree of the same version, replacing) on
	// A is what B serves next, and the old content leaves the store.
	src2, blob2, pub2 := releasetest.SignedTree(t, ChunkSize+5, "0.6.0")
	keys2 := releasetest.Keyring(t, 1, pub2)
	if _, err := Import(context.Background(), dbA, dirA, src2, keys2, ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	want2, _ := os.ReadFile(filepath.Join(src2, blob2))
	if got, err := readAll(t, mB, "0.6.0", blob2); err != nil || !bytes.Equal(got, want2) {
		t.Fatalf("after the re-import B serves %d bytes (%v), want %d", len(got), err, len(want2))
	}
	_ = dbB.View(func(tx *store.Tx) error {
		return bucketContent.ForEach(tx, func(k string, _ []byte) error {
			if k[:len(rec.ImportID)] == rec.ImportID {
				t.Errorf("content of the replaced import is still stored: %q", k)
			}
			return nil
		})
	})

	// Content damaged in the store: a replica filling its cache refuses
	// it, and the file is corrupt for every replica until re-imported.
	rec2, _, _ := Get(dbA, "0.6.0", nil)
	if err := dbA.Update(func(tx *store.Tx) error {
		return bucketContent.Put(tx, contentKey(rec2.ImportID, blob2, 1), []byte("evil"))
	}); err != nil {
		t.Fatal(err)
	}
	dbC, dirC := replica(t, dsn)
	mC := NewMirror(MirrorConfig{DB: dbC, DataDir: dirC})
	t.Cleanup(mC.Close)
	if _, err := readAll(t, mC, "0.6.0", blob2); apierr.CodeOf(err) != apierr.ReleaseCorrupt {
		t.Fatalf("a damaged chunk in the store: %v, want RELEASE_CORRUPT", err)
	}
	if _, err := os.Stat(filepath.Join(dirC, cacheDirName, rec2.ImportID, filepath.FromSlash(blob2))); err == nil {
		t.Fatal("a file that failed verification reached the cache")
	}
	if mB.Offered("0.6.0") {
		t.Fatal("the release is still offered with a corrupt file")
	}
}
