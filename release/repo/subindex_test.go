package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"stratum/apierr"
	"stratum/release"
	"stratum/release/releasetest"
	"stratum/store"
	"stratum/store/storetest"
)

// readers numbers the holders of openReader's reads: each its own
// registration, so concurrent reads are not held to one's share.
var readers atomic.Int64

// openReader opens file path of release 0.6.0: the error is Stat's
// (Open must succeed).
func openReader(t *testing.T, m *Mirror, path string) (*Reader, error) {
	t.Helper()
	fi, err := m.Stat("0.6.0", path)
	if err != nil {
		return nil, err
	}
	rd, err := m.Open(fmt.Sprint("reader-", readers.Add(1)), fi)
	if err != nil {
		t.Fatal(err)
	}
	return rd, nil
}

// readRange opens the file and reads [off, off+n).
func readRange(t *testing.T, m *Mirror, path string, off, n int64) ([]byte, error) {
	t.Helper()
	rd, err := openReader(t, m, path)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	p := make([]byte, n)
	k, err := rd.ReadAt(p, off)
	return p[:k], err
}

// TestRangeHashesOnlyTouchedSubChunks: a 64 KiB range hashes the one or
// two 64 KiB sub-chunks it touches, and a sub-chunk corrupted on disk is
// caught by a range that touches it, however small, and by no other.
func TestRangeHashesOnlyTouchedSubChunks(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 3*ChunkSize+77, 4, -1)
	const bad = 20 // sub-chunk 20 of the file (in its second MiB)
	onDisk := filepath.Join(m.dir, "0.6.0", filepath.FromSlash(blob))

	for _, c := range []struct {
		name      string
		off, n    int64
		subHashed uint64
	}{
		{"aligned 64 KiB", 5 * SubChunkSize, SubChunkSize, 1},
		{"straddling 64 KiB", 7*SubChunkSize + 100, SubChunkSize, 2},
		{"10 bytes", 9*SubChunkSize + 3, 10, 1},
		{"the last 77 bytes", 3 * ChunkSize, 77, 1},
	} {
		before := m.CacheMisses()
		got, err := readRange(t, m, blob, c.off, c.n)
		if err != nil || !bytes.Equal(got, data[c.off:c.off+c.n]) {
			t.Fatalf("%s: %d bytes, %v", c.name, len(got), err)
		}
		if hashed := m.CacheMisses() - before; hashed != c.subHashed {
			t.Fatalf("%s: %d sub-chunks read and hashed, want %d", c.name, hashed, c.subHashed)
		}
	}

	releasetest.FlipByte(t, onDisk, bad*SubChunkSize+SubChunkSize-1)
	// Ranges beside the bad sub-chunk, even in its 1 MiB chunk, are served.
	for _, off := range []int64{(bad - 1) * SubChunkSize, (bad + 1) * SubChunkSize} {
		if got, err := readRange(t, m, blob, off, SubChunkSize); err != nil || !bytes.Equal(got, data[off:off+SubChunkSize]) {
			t.Fatalf("range at %d beside the bad sub-chunk: %v", off, err)
		}
	}
	if m.CorruptCount() != 0 {
		t.Fatal("a range that does not touch the bad sub-chunk marked the file")
	}
	// One byte of it: caught, nothing returned.
	got, err := readRange(t, m, blob, bad*SubChunkSize+SubChunkSize-1, 1)
	if apierr.CodeOf(err) != apierr.ReleaseCorrupt || len(got) != 0 {
		t.Fatalf("1-byte range of the bad sub-chunk: %d bytes, %v", len(got), err)
	}
	if m.CorruptCount() != 1 || m.Offered("0.6.0") {
		t.Fatal("the corrupt sub-chunk did not mark the file")
	}
	if _, err := m.Stat("0.6.0", blob); apierr.CodeOf(err) != apierr.ReleaseCorrupt {
		t.Fatalf("after the mark: %v", err)
	}
}

// TestReadStopsAtTheBadSubChunk: a long read returns exactly the bytes
// before the bad sub-chunk, cache or not.
func TestReadStopsAtTheBadSubChunk(t *testing.T) {
	for _, cache := range []int64{-1, 0} {
		m, blob, data, _ := importedMirror(t, 4*ChunkSize, 4, cache)
		bad := int64(2*ChunkSize + 3*SubChunkSize)
		releasetest.FlipByte(t, filepath.Join(m.dir, "0.6.0", filepath.FromSlash(blob)), bad+10)
		got, err := readRange(t, m, blob, 0, int64(len(data)))
		if apierr.CodeOf(err) != apierr.ReleaseCorrupt || int64(len(got)) != bad || !bytes.Equal(got, data[:bad]) {
			t.Fatalf("cache %d: %d bytes (want %d), %v", cache, len(got), bad, err)
		}
	}
}

// TestCache: concurrent readers of one file read and hash each unit once
// (the others wait for it or find it cached); what the cache holds are
// the verified bytes, so a byte changed on disk after they were verified
// is not sent; the cache keeps to its size.
func TestCache(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 3*ChunkSize+77, 8, 0)
	units := uint64((len(data) + SubChunkSize - 1) / SubChunkSize)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			got, err := readRange(t, m, blob, 0, int64(len(data)))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("concurrent whole read: %d bytes, %v", len(got), err)
			}
		})
	}
	wg.Wait()
	if m.CacheMisses() != units || m.CacheHits() != 5*units {
		t.Fatalf("6 concurrent reads of %d units: %d read from disk, %d from the cache", units, m.CacheMisses(), m.CacheHits())
	}
	if m.CacheBytes() != len(data) {
		t.Fatalf("cache holds %d bytes, want %d", m.CacheBytes(), len(data))
	}

	releasetest.FlipByte(t, filepath.Join(m.dir, "0.6.0", filepath.FromSlash(blob)), 100)
	if got, err := readRange(t, m, blob, 0, 200); err != nil || !bytes.Equal(got, data[:200]) {
		t.Fatalf("cached unit after the disk changed: %v", err)
	}

	small, blob2, data2, _ := importedMirror(t, 3*ChunkSize, 2, 4*SubChunkSize)
	for range 2 {
		if got, err := readRange(t, small, blob2, 0, int64(len(data2))); err != nil || !bytes.Equal(got, data2) {
			t.Fatalf("read through a small cache: %v", err)
		}
		if small.CacheBytes() > 4*SubChunkSize {
			t.Fatalf("cache of %d bytes holds %d", 4*SubChunkSize, small.CacheBytes())
		}
	}
}

// TestCacheAfterReimport: a file re-imported with other content is read
// from the new import, never from the cached units of the old one.
func TestCacheAfterReimport(t *testing.T) {
	keyFile, pub, _ := releasetest.Key(t, t.TempDir(), "k")
	keys := releasetest.Keyring(t, 1, pub)
	tree := func(seed byte) (string, []byte) {
		src, _ := releasetest.MakeTree(t, 1000)
		data := releasetest.RandomBytes(3<<20+17, seed)
		releasetest.WriteFile(t, src, releasetest.SysextPath, data)
		if _, err := release.Sign(src, keyFile, "0.6.0", nil); err != nil {
			t.Fatal(err)
		}
		return src, data
	}
	oldSrc, oldData := tree(2)
	newSrc, newData := tree(9)
	db, dataDir := storetest.Temp(t)
	if _, err := importTree(context.Background(), db, dataDir, oldSrc, keys, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	m := newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: 2})
	t.Cleanup(m.Close)
	for range 2 {
		if got, err := readRange(t, m, releasetest.SysextPath, 0, int64(len(oldData))); err != nil || !bytes.Equal(got, oldData) {
			t.Fatalf("old import: %v", err)
		}
	}
	if m.CacheHits() == 0 {
		t.Fatal("the second read was not served from the cache: the test proves nothing")
	}
	if _, err := importTree(context.Background(), db, dataDir, newSrc, keys, ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	hits := m.CacheHits()
	if got, err := readRange(t, m, releasetest.SysextPath, 0, int64(len(newData))); err != nil || !bytes.Equal(got, newData) {
		t.Fatalf("after re-import: equal to the new content %v, to the old %v, %v",
			bytes.Equal(got, newData), bytes.Equal(got, oldData), err)
	}
	if m.CacheHits() != hits {
		t.Fatalf("%d units of the re-imported file came from the cache", m.CacheHits()-hits)
	}
}

// TestVerifiedStopsItsGoroutine: a caller that stops a long read early
// leaves no goroutine behind, so the file can be closed.
func TestVerifiedStopsItsGoroutine(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 8*ChunkSize, 2, 0)
	baseline := runtime.NumGoroutine()
	rd, err := openReader(t, m, blob)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for b, err := range rd.Verified(100, rd.Size()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
		if len(got) > ChunkSize {
			break
		}
	}
	rd.Close()
	if !bytes.Equal(got, data[100:100+len(got)]) {
		t.Fatal("wrong bytes")
	}
	releasetest.WaitGoroutines(t, baseline)
	// And a read over the whole file through io.Reader.
	rd, _ = openReader(t, m, blob)
	defer rd.Close()
	if all, err := io.ReadAll(io.NewSectionReader(rd, 0, rd.Size())); err != nil || !bytes.Equal(all, data) {
		t.Fatalf("whole read: %v", err)
	}
}

// TestUpgradeIndexes: an import made before the sub-chunk index (none
// stored, or one of another import) is served verified by 1 MiB chunk
// until UpgradeIndexes reads each file once and stores the index the
// import would have; a file damaged on disk since its import is marked
// corrupt, not indexed; a second run finds nothing to do.
func TestUpgradeIndexes(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 3*ChunkSize+77, 2, 0)
	db, dataDir := m.db, filepath.Dir(m.dir)
	rec, _, _ := getRelease(db, "0.6.0", nil)
	imported := map[string][]byte{}
	err := db.Update(func(tx *store.Tx) error {
		if err := bucketSubs.Keys(tx, func(k string) error {
			si, _, err := getSubRecord(tx, k)
			imported[k] = si.Sums
			return err
		}); err != nil {
			return err
		}
		if err := deletePrefix(tx, bucketSubs, "0.6.0"); err != nil {
			return err
		}
		// One file holds the index of an earlier import: not used.
		return putSubIndex(tx, fileKey("0.6.0", "os/index.json"), "0123456789abcdef", imported[fileKey("0.6.0", "os/index.json")])
	})
	if err != nil || len(imported) < 5 {
		t.Fatalf("%d sub-chunk indexes at import: %v", len(imported), err)
	}

	old := newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: 2})
	t.Cleanup(old.Close)
	rd, err := openReader(t, old, blob)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 100)
	if _, err := rd.ReadAt(p, ChunkSize+5); err != nil || !bytes.Equal(p, data[ChunkSize+5:ChunkSize+105]) || rd.unit != ChunkSize {
		t.Fatalf("read before the upgrade: unit %d, %v", rd.unit, err)
	}
	rd.Close()

	releasetest.FlipByte(t, filepath.Join(dataDir, "releases", "0.6.0", releasetest.SysextPath), 2*ChunkSize+1)
	if err := upgradeIndexes(context.Background(), db, dataDir, discardLog()); err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		for k, want := range imported {
			si, found, err := getSubRecord(tx, k)
			switch {
			case err != nil:
				return err
			case k == fileKey("0.6.0", releasetest.SysextPath):
				if found {
					t.Errorf("the damaged file got a sub-chunk index")
				}
			case !found || si.ImportID != rec.ImportID || !bytes.Equal(si.Sums, want):
				t.Errorf("%q: found %v, import %s (want %s), equal to the import's %v", k, found, si.ImportID, rec.ImportID, bytes.Equal(si.Sums, want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := getRelease(db, "0.6.0", nil); len(r.Corrupt) != 1 || r.Corrupt[0] != releasetest.SysextPath {
		t.Fatalf("corrupt after the upgrade: %v", r.Corrupt)
	}
	if todo, err := filesWithoutSubIndex(db); err != nil || len(todo) != 0 {
		t.Fatalf("left to do after the upgrade: %d, %v", len(todo), err)
	}

	up := newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: 2})
	t.Cleanup(up.Close)
	if got, err := readRange(t, up, blob, ChunkSize+5, 100); err != nil || !bytes.Equal(got, data[ChunkSize+5:ChunkSize+105]) || up.CacheMisses() != 1 {
		t.Fatalf("read after the upgrade: %v, %d units hashed", err, up.CacheMisses())
	}
}

func TestUpgradeIndexesCancelled(t *testing.T) {
	m, _, _, _ := importedMirror(t, 2*ChunkSize, 2, 0)
	db, dataDir := m.db, filepath.Dir(m.dir)
	db.Update(func(tx *store.Tx) error { return deletePrefix(tx, bucketSubs, "0.6.0") })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := upgradeIndexes(ctx, db, dataDir, discardLog()); err == nil {
		t.Fatal("a cancelled upgrade returned nil")
	}
	if todo, _ := filesWithoutSubIndex(db); len(todo) == 0 {
		t.Fatal("a cancelled upgrade indexed files")
	}
	if err := upgradeIndexes(context.Background(), db, dataDir, discardLog()); err != nil {
		t.Fatal(err)
	}
	if todo, _ := filesWithoutSubIndex(db); len(todo) != 0 {
		t.Fatalf("%d files left after the second run", len(todo))
	}
	if _, err := os.Stat(filepath.Join(dataDir, "releases", "0.6.0")); err != nil {
		t.Fatal(err)
	}
}

// TestOlderSubIndexIsUpgraded: an import whose sub-chunk index is an older
// build's (SHA-256 of 64 KiB sub-chunks, no hash named) is verified by
// 1 MiB chunk until the start-up upgrade replaces it with this build's
// (BLAKE3 of 16 KiB), after which a read hashes only the sub-chunks it
// touches.
func TestOlderSubIndexIsUpgraded(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 2*ChunkSize+77, 2, 0)
	db, dataDir := m.db, filepath.Dir(m.dir)
	rec, _, _ := getRelease(db, "0.6.0", nil)
	key := fileKey("0.6.0", blob)
	var olderSums []byte
	for off := 0; off < len(data); off += 64 << 10 {
		s := sha256.Sum256(data[off:min(off+64<<10, len(data))])
		olderSums = append(olderSums, s[:]...)
	}
	if err := db.Update(func(tx *store.Tx) error {
		return putSubRecord(tx, key, subIndex{ImportID: rec.ImportID, Sums: olderSums})
	}); err != nil {
		t.Fatal(err)
	}
	old := newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: 2})
	t.Cleanup(old.Close)
	rd, err := openReader(t, old, blob)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 100)
	if _, err := rd.ReadAt(p, ChunkSize+5); err != nil || !bytes.Equal(p, data[ChunkSize+5:ChunkSize+105]) || rd.unit != ChunkSize {
		t.Fatalf("read with the older index: unit %d, %v", rd.unit, err)
	}
	rd.Close()
	if err := upgradeIndexes(context.Background(), db, dataDir, discardLog()); err != nil {
		t.Fatal(err)
	}
	var si subIndex
	if err := db.View(func(tx *store.Tx) (err error) { si, _, err = getSubRecord(tx, key); return err }); err != nil {
		t.Fatal(err)
	}
	if si.Hash != subHash || int64(len(si.Sums)) != (int64(len(data))+SubChunkSize-1)/SubChunkSize*32 {
		t.Fatalf("after the upgrade: hash %q, %d bytes of sums", si.Hash, len(si.Sums))
	}
	up := newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: 2})
	t.Cleanup(up.Close)
	if got, err := readRange(t, up, blob, ChunkSize+5, 100); err != nil || !bytes.Equal(got, data[ChunkSize+5:ChunkSize+105]) || up.CacheMisses() != 1 {
		t.Fatalf("read after the upgrade: %v, %d units hashed", err, up.CacheMisses())
	}
}

// TestSubSumIsBLAKE3: the sub-chunk hash is BLAKE3 whichever way it is
// computed (a whole unit in one compression, a shorter one through the
// hasher): the official test vectors (input byte i is i mod 251).
func TestSubSumIsBLAKE3(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444"},
		{8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b"},
		{SubChunkSize, "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4"},
	} {
		in := make([]byte, c.n)
		for i := range in {
			in[i] = byte(i % 251)
		}
		if got := fmt.Sprintf("%x", subSum(in)); got != c.want {
			t.Errorf("%d bytes: %s, want %s", c.n, got, c.want)
		}
	}
}

// TestLongLoneReadPassesTheCache: a read longer than the cache, alone on
// its file, reads past it (it would only evict its own units), still
// verifying every unit; a short read, or a long one while another reader
// reads the file, goes through the cache.
func TestLongLoneReadPassesTheCache(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 3*ChunkSize, 4, ChunkSize)
	if got, err := readRange(t, m, blob, 0, int64(len(data))); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("lone whole read: %d bytes, %v", len(got), err)
	}
	if m.CacheBytes() != 0 || m.CacheMisses() != uint64(len(data)/SubChunkSize) {
		t.Fatalf("a lone read longer than the cache left %d bytes in it (%d units read)", m.CacheBytes(), m.CacheMisses())
	}
	if got, err := readRange(t, m, blob, 5*SubChunkSize, 64<<10); err != nil || !bytes.Equal(got, data[5*SubChunkSize:5*SubChunkSize+64<<10]) {
		t.Fatalf("range: %v", err)
	}
	if m.CacheBytes() != 64<<10 {
		t.Fatalf("a 64 KiB range left %d bytes in the cache, want 64 KiB", m.CacheBytes())
	}
	other, err := openReader(t, m, blob) // a second reader of the file
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got, err := readRange(t, m, blob, 0, int64(len(data))); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("whole read beside another reader: %v", err)
	}
	if m.CacheBytes() != ChunkSize {
		t.Fatalf("a long read beside another reader left %d bytes in the cache, want it full (%d)", m.CacheBytes(), ChunkSize)
	}
	releasetest.FlipByte(t, filepath.Join(m.dir, "0.6.0", filepath.FromSlash(blob)), 10)
	other.Close()
	if _, err := readRange(t, m, blob, 0, int64(len(data))); apierr.CodeOf(err) != apierr.ReleaseCorrupt {
		t.Fatalf("lone read over a flipped byte: %v, want RELEASE_CORRUPT", err)
	}
}

// BenchmarkSubSum: one whole unit's hash (about 4 GB/s with AVX-512 on
// the development machine's Xeon, 3.5-4 us a unit).
func BenchmarkSubSum(b *testing.B) {
	unit := make([]byte, SubChunkSize)
	for i := range unit {
		unit[i] = byte(i * 7)
	}
	b.SetBytes(SubChunkSize)
	for b.Loop() {
		subSum(unit)
	}
}

// TestGroupHashEdges: units are hashed in groups (subSums, a step's 16
// together); a read returns exactly the file's bytes at any edge of
// a unit, a group or the file, and a byte changed on disk in any unit of
// a group (its first, a middle one, its last, the next group's first,
// the file's shorter last unit) is refused: the read returns exactly the
// bytes before that unit, then RELEASE_CORRUPT, with the cache or without.
func TestGroupHashEdges(t *testing.T) {
	const size = 2*ChunkSize + 5*SubChunkSize + 77 // 134 units, the last of 77 bytes
	m, blob, data, _ := importedMirror(t, size, 4, -1)
	for _, r := range []struct{ off, n int64 }{
		{0, 1}, {0, size}, {SubChunkSize - 1, 2}, {63*SubChunkSize - 5, 10}, {64*SubChunkSize - 1, SubChunkSize + 2},
		{ChunkSize - 3, ChunkSize + 6}, {size - 78, 78}, {size - 1, 1}, {5, size - 10},
	} {
		if got, err := readRange(t, m, blob, r.off, r.n); err != nil || !bytes.Equal(got, data[r.off:r.off+r.n]) {
			t.Fatalf("[%d, +%d): %d bytes, %v", r.off, r.n, len(got), err)
		}
	}
	for _, cache := range []int64{-1, 0} {
		for _, bad := range []int64{0, 15, 16, 17, 63, 64, 127, 133} {
			m, blob, data, _ := importedMirror(t, size, 4, cache)
			releasetest.FlipByte(t, filepath.Join(m.dir, "0.6.0", filepath.FromSlash(blob)), bad*SubChunkSize+min(40, size-bad*SubChunkSize-1))
			got, err := readRange(t, m, blob, 0, size)
			if apierr.CodeOf(err) != apierr.ReleaseCorrupt || int64(len(got)) != bad*SubChunkSize || !bytes.Equal(got, data[:len(got)]) {
				t.Fatalf("cache %d, unit %d changed: %d bytes (want %d), %v", cache, bad, len(got), bad*SubChunkSize, err)
			}
		}
	}
}

// TestBusyLongReadVerifiesInTurn: with as many reads in flight as the
// scheduler has processors, a long read is not pipelined (each step is
// read, hashed and handed on by its own goroutine, in turn); it returns
// the same bytes, and a changed byte in a later step is refused with
// exactly the bytes before its unit returned.
func TestBusyLongReadVerifiesInTurn(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	m, blob, data, _ := importedMirror(t, 3*ChunkSize+77, procs+2, -1)
	if !m.pipelines() {
		t.Fatal("an idle mirror does not pipeline")
	}
	for range procs {
		rd, err := openReader(t, m, blob)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
	}
	if m.pipelines() {
		t.Fatalf("%d reads in flight on %d processors, and a long read would still be pipelined", procs, procs)
	}
	if got, err := readRange(t, m, blob, 5, int64(len(data))-10); err != nil || !bytes.Equal(got, data[5:len(data)-5]) {
		t.Fatalf("busy long read: %d bytes, %v", len(got), err)
	}
	bad := int64(ChunkSize + 70*SubChunkSize)
	releasetest.FlipByte(t, filepath.Join(m.dir, "0.6.0", filepath.FromSlash(blob)), bad+3)
	got, err := readRange(t, m, blob, 0, int64(len(data)))
	if apierr.CodeOf(err) != apierr.ReleaseCorrupt || int64(len(got)) != bad || !bytes.Equal(got, data[:bad]) {
		t.Fatalf("busy long read over a changed byte: %d bytes (want %d), %v", len(got), bad, err)
	}
}
