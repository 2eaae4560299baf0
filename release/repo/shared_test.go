package repo

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/internal/pgtest"
	"stratum/release/releasetest"
	"stratum/store"
	"stratum/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// replica opens the shared database with its own data directory.
func replica(t *testing.T, dsn string) (*store.DB, string) {
	t.Helper()
	return storetest.Open(t, dsn), t.TempDir()
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

// sharedPair is a release 0.6.0 imported on replica A of a fresh shared
// database, and a replica B that did not import it.
type sharedPair struct {
	dsn, src, blob, dirA, dirB string
	dbA, dbB                   *store.DB
}

func importedOnA(t *testing.T) sharedPair {
	t.Helper()
	p := sharedPair{dsn: pgtest.DSN(t)}
	src, blob, pub := releasetest.SignedTree(t, 2*ChunkSize+333, "0.6.0")
	p.src, p.blob = src, blob
	p.dbA, p.dirA = replica(t, p.dsn)
	p.dbB, p.dirB = replica(t, p.dsn)
	if _, err := importTree(context.Background(), p.dbA, p.dirA, src, releasetest.Keyring(t, 1, pub), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// On a shared store a release imported on one replica is served by
// another from its cache, filled from the store and verified; a
// re-import replaces what every replica serves; content damaged in the
// store is refused and marked corrupt.
func TestSharedReleases(t *testing.T) {
	s := importedOnA(t)
	dsn, src, blob, dbA, dirA, dbB, dirB := s.dsn, s.src, s.blob, s.dbA, s.dirA, s.dbB, s.dirB
	want, err := os.ReadFile(filepath.Join(src, blob))
	if err != nil {
		t.Fatal(err)
	}
	mB := newMirror(mirrorConfig{DB: dbB, DataDir: dirB})
	t.Cleanup(mB.Close)
	if _, err := os.Stat(filepath.Join(dirB, "releases", "0.6.0")); err == nil {
		t.Fatal("replica B has an imported tree it never imported")
	}
	got, err := readAll(t, mB, "0.6.0", blob)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("B serves %d bytes (%v), want the %d imported on A", len(got), err, len(want))
	}
	rec, _, _ := getRelease(dbB, "0.6.0", nil)
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
	if _, err := importTree(context.Background(), dbA, dirA, src2, keys2, ImportOptions{Replace: true}); err != nil {
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
	rec2, _, _ := getRelease(dbA, "0.6.0", nil)
	if err := dbA.Update(func(tx *store.Tx) error {
		return bucketContent.Put(tx, contentKey(rec2.ImportID, blob2, 1), []byte("evil"))
	}); err != nil {
		t.Fatal(err)
	}
	dbC, dirC := replica(t, dsn)
	mC := newMirror(mirrorConfig{DB: dbC, DataDir: dirC})
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

// A replica whose cached copy of a file is damaged on its own disk (a
// byte flipped, the file cut short) fills it again from the store and
// serves the release; the release is not marked corrupt for the other
// replicas (SPEC 18's HA edges).
func TestSharedCacheDamageRefilled(t *testing.T) {
	s := importedOnA(t)
	src, blob, dbA, dirA, dbB, dirB := s.src, s.blob, s.dbA, s.dirA, s.dbB, s.dirB
	want, _ := os.ReadFile(filepath.Join(src, blob))
	mirror := func() *Mirror {
		// A fresh mirror each time: no verified chunk kept in memory.
		m := newMirror(mirrorConfig{DB: dbB, DataDir: dirB})
		t.Cleanup(m.Close)
		return m
	}
	if got, err := readAll(t, mirror(), "0.6.0", blob); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("B fills its cache: %d bytes, %v", len(got), err)
	}
	rec, _, _ := getRelease(dbB, "0.6.0", nil)
	cached := filepath.Join(dirB, cacheDirName, rec.ImportID, filepath.FromSlash(blob))

	// A byte flipped: the read that meets it is told to retry (the copy
	// is removed), the next one is served from a refilled copy.
	if err := os.Chmod(cached, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(cached, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{want[ChunkSize+7] ^ 0xff}, ChunkSize+7); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readAll(t, mirror(), "0.6.0", blob); apierr.CodeOf(err) != apierr.ReleaseBusy {
		t.Fatalf("a read meeting the damaged copy: %v, want RELEASE_BUSY (retry)", err)
	}
	if got, err := readAll(t, mirror(), "0.6.0", blob); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the damage B serves %d bytes (%v), want the %d imported", len(got), err, len(want))
	}

	// Cut short: refilled at open, served at once.
	if err := os.Chmod(cached, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cached, ChunkSize); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(t, mirror(), "0.6.0", blob); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the truncation B serves %d bytes (%v), want %d", len(got), err, len(want))
	}

	// Nothing is marked corrupt: A and a new replica offer the release.
	mA := newMirror(mirrorConfig{DB: dbA, DataDir: dirA})
	t.Cleanup(mA.Close)
	if !mA.Offered("0.6.0") || !mirror().Offered("0.6.0") {
		t.Fatal("a damaged cache on B marked the release corrupt cluster-wide")
	}
	_ = dbA.View(func(tx *store.Tx) error {
		return bucketCorrupt.Keys(tx, func(k string) error {
			t.Errorf("marked corrupt: %q", k)
			return nil
		})
	})
}

// Content an import stored before it was killed (its commit never came)
// is removed by CollectOrphans once its mark has not been touched for
// the idle time; a live import's content and a committed release's stay.
func TestSharedOrphanedChunksCollected(t *testing.T) {
	dsn := pgtest.DSN(t)
	src, blob, pub := releasetest.SignedTree(t, 2*ChunkSize+333, "0.6.0")
	keys := releasetest.Keyring(t, 1, pub)
	db, dir := replica(t, dsn)
	if _, err := importTree(context.Background(), db, dir, src, keys, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	// What a killed import leaves: its content and its mark, no record.
	index := map[string]*fileIndex{}
	st, _ := os.Stat(filepath.Join(src, blob))
	index[blob] = &fileIndex{Size: st.Size()}
	for _, id := range []string{"killed-import", "live-import"} {
		if err := storeContent(context.Background(), db, src, "0.7.0", id, index); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * OrphanIdle).UTC()
	if err := db.Update(func(tx *store.Tx) error {
		return bucketImports.Put(tx, "killed-import", importMark{Release: "0.7.0", Touched: old})
	}); err != nil {
		t.Fatal(err)
	}
	count := func() map[string]int {
		n := map[string]int{}
		_ = db.View(func(tx *store.Tx) error {
			return bucketContent.Keys(tx, func(k string) error {
				id, _, _ := strings.Cut(k, "\x00")
				n[id]++
				return nil
			})
		})
		return n
	}
	before := count()
	if before["killed-import"] != 3 || before["live-import"] != 3 {
		t.Fatalf("chunks stored: %v", before)
	}
	removed, err := collectOrphans(db, OrphanIdle)
	if err != nil || len(removed) != 1 || removed[0] != "killed-import" {
		t.Fatalf("CollectOrphans = %v, %v; want [killed-import]", removed, err)
	}
	after := count()
	rec, _, _ := getRelease(db, "0.6.0", nil)
	if after["killed-import"] != 0 || after["live-import"] != 3 || after[rec.ImportID] != before[rec.ImportID] || after[rec.ImportID] == 0 {
		t.Fatalf("chunks after collecting: %v (before %v)", after, before)
	}
	m := newMirror(mirrorConfig{DB: db, DataDir: t.TempDir()})
	t.Cleanup(m.Close)
	if got, err := readAll(t, m, "0.6.0", blob); err != nil || int64(len(got)) != st.Size() {
		t.Fatalf("the committed release after collecting: %d bytes, %v", len(got), err)
	}
}
