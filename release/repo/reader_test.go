package repo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"stratum/apierr"
	"stratum/release/releasetest"
	"stratum/store/storetest"
)

// importedMirror imports a release whose blob has blobSize bytes and
// serves it with concurrency slots and a cache of cacheBytes (0: the
// default; < 0: none).
func importedMirror(t testing.TB, blobSize, concurrency int, cacheBytes int64) (m *Mirror, blob string, data []byte, reimport func()) {
	t.Helper()
	src, blob, pub := releasetest.SignedTree(t, blobSize, "0.6.0")
	keys := releasetest.Keyring(t, 1, pub)
	db, dataDir := storetest.Temp(t)
	reimport = func() {
		if _, err := importTree(context.Background(), db, dataDir, src, keys, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reimport()
	data, err := os.ReadFile(filepath.Join(src, blob))
	if err != nil {
		t.Fatal(err)
	}
	m = newMirror(mirrorConfig{DB: db, DataDir: dataDir, Concurrency: concurrency, CacheBytes: cacheBytes, Log: discardLog()})
	t.Cleanup(m.Close)
	return m, blob, data, reimport
}

// TestReader: ReadAt returns exactly the file's bytes at any offset, the
// slot is held until Close, and a stale mismatch (against an index a
// re-import has replaced) marks nothing corrupt.
func TestReader(t *testing.T) {
	m, blob, data, reimport := importedMirror(t, 3*ChunkSize+77, 1, 0)
	fi, err := m.Stat("0.6.0", blob)
	if err != nil || fi.Size != int64(len(data)) || fi.ETag() != `"sha256:`+fi.SHA256+`"` {
		t.Fatalf("Stat: %+v %v", fi, err)
	}
	rd, err := m.Open("a", fi)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(rd, 0, rd.Size()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("whole read: %d bytes, %v", len(got), err)
	}
	p := make([]byte, 100)
	if n, err := rd.ReadAt(p, ChunkSize-50); n != 100 || err != nil || !bytes.Equal(p, data[ChunkSize-50:ChunkSize+50]) {
		t.Fatalf("across a chunk boundary: %d %v", n, err)
	}
	if n, err := rd.ReadAt(p, int64(len(data))-10); n != 10 || !errors.Is(err, io.EOF) {
		t.Fatalf("past the end: %d %v", n, err)
	}
	if _, err := m.Open("b", fi); apierr.CodeOf(err) != apierr.ReleaseBusy {
		t.Fatalf("second read with one slot: %v", err)
	}
	rd.Close()
	rd.Close() // twice is harmless and gives back one slot
	if m.InFlight() != 0 {
		t.Fatalf("%d slots taken after Close", m.InFlight())
	}

	reimport()
	if err := m.broken(fi, errors.New("chunk 0: mismatch")); apierr.CodeOf(err) != apierr.ReleaseCorrupt {
		t.Fatalf("broken: %v", err)
	}
	if m.CorruptCount() != 0 || !m.Offered("0.6.0") {
		t.Fatal("a mismatch against a replaced index marked the new import corrupt")
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// BenchmarkRange64K: the founder's own work for one 64 KiB ranged read
// (Stat, Open with its slot, the verified bytes, Close), without the
// network: what a mirror-range64k request costs above nginx's.
func BenchmarkRange64K(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int64
	}{{"nocache", -1}, {"cache", 0}} {
		b.Run(c.name, func(b *testing.B) {
			// 256 MiB: a chunk index of 256 hashes to look up, and
			// random offsets, which straddle units, as mirror-range64k has.
			m, blob, data, _ := importedMirror(b, 256*ChunkSize, 64, c.cache)
			rng := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(64 << 10)
			i := 0
			for b.Loop() {
				off := rng.Int64N(int64(len(data)) - 64<<10)
				i++
				fi, err := m.Stat("0.6.0", blob)
				if err != nil {
					b.Fatal(err)
				}
				rd, err := m.Open("bench", fi)
				if err != nil {
					b.Fatal(err)
				}
				n := int64(0)
				for p, err := range rd.Verified(off, off+64<<10) {
					if err != nil {
						b.Fatal(err)
					}
					if i == 1 && !bytes.Equal(p, data[off+n:off+n+int64(len(p))]) {
						b.Fatal("wrong bytes")
					}
					n += int64(len(p))
				}
				rd.Close()
			}
		})
	}
}

// BenchmarkWholeRead: the founder's own work for one whole download of a
// 256 MiB file (Verified in pipelined steps), without the network, with
// and with a cache a quarter of its size (as the default 256 MiB cache
// is of mirror-full's 1 GiB file: each download's units evict the
// previous one's, so every unit is read and hashed either way). ns/op over 256 MiB; -cpuprofile for where it goes.
func BenchmarkWholeRead(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int64
	}{{"nocache", -1}, {"cache", 64 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			m, blob, data, _ := importedMirror(b, 256*ChunkSize, 64, c.cache)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				fi, err := m.Stat("0.6.0", blob)
				if err != nil {
					b.Fatal(err)
				}
				rd, err := m.Open("bench", fi)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for p, err := range rd.Verified(0, fi.Size) {
					if err != nil {
						b.Fatal(err)
					}
					n += len(p)
				}
				rd.Close()
				if n != len(data) {
					b.Fatalf("%d bytes", n)
				}
			}
		})
	}
}

// TestSharedHandle: readers of one file share its open handle, which
// changes nothing of what is verified: a byte flipped on disk after the
// handle was opened is caught through it, the handle is then retired (the
// next read opens the file again), and the mirror's Close closes what its
// readers leave open.
func TestSharedHandle(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 2*ChunkSize, 4, -1)
	fi, err := m.Stat("0.6.0", blob)
	if err != nil {
		t.Fatal(err)
	}
	rd1, err := m.Open("a", fi)
	if err != nil {
		t.Fatal(err)
	}
	rd2, err := m.Open("b", fi)
	if err != nil {
		t.Fatal(err)
	}
	if rd1.h != rd2.h {
		t.Fatal("two readers of one file opened it twice")
	}
	p := make([]byte, len(data))
	if n, err := rd1.ReadAt(p, 0); n != len(data) || err != nil || !bytes.Equal(p, data) {
		t.Fatalf("first read: %d %v", n, err)
	}
	rd1.Close()
	releasetest.FlipByte(t, filepath.Join(m.dir, "0.6.0", filepath.FromSlash(blob)), ChunkSize+5)
	if _, err := rd2.ReadAt(p, 0); apierr.CodeOf(err) != apierr.ReleaseCorrupt {
		t.Fatalf("a byte flipped under the shared handle: %v, want RELEASE_CORRUPT", err)
	}
	old := rd2.h
	rd2.Close()
	if _, err := old.f.Stat(); err == nil {
		t.Fatal("the handle of a failed read is still open after its last reader")
	}
	rd3, err := m.Open("c", fi)
	if err != nil {
		t.Fatal(err)
	}
	if rd3.h == old {
		t.Fatal("a reader after the failure got the retired handle")
	}
	m.Close()
	rd3.Close()
	if _, err := rd3.h.f.Stat(); err == nil {
		t.Fatal("a handle is still open after the mirror and its readers closed")
	}
}

// TestCloseCutsReadsInFlight: closing the mirror cuts every read holding
// a slot, once: its OnCut hook runs (the HTTP layer's immediate write
// deadline), its next unit is refused with the reason, nothing is
// counted as a limit's cut; a hook set after the cut runs at once, one
// removed does not run, and no read starts after the close.
func TestCloseCutsReadsInFlight(t *testing.T) {
	m, blob, _, _ := importedMirror(t, 2*ChunkSize, 4, -1)
	fi, err := m.Stat("0.6.0", blob)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := m.Open("a", fi)
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := m.Open("b", fi)
	if err != nil {
		t.Fatal(err)
	}
	var hooked, removed atomic.Int32
	rd.OnCut(func() { hooked.Add(1) })
	quiet.OnCut(func() { removed.Add(1) })
	quiet.OnCut(nil)
	m.Close()
	if hooked.Load() != 1 || removed.Load() != 0 {
		t.Fatalf("hooks after Close: %d called (want 1), removed one called %d times", hooked.Load(), removed.Load())
	}
	for _, err := range rd.Verified(0, 100) {
		if !errors.Is(rd.cutCause(), errShutdown) || apierr.CodeOf(err) != apierr.Unavailable {
			t.Fatalf("a unit after Close: %v (cause %v)", err, rd.cutCause())
		}
	}
	rd.OnCut(func() { hooked.Add(1) })
	if hooked.Load() != 2 {
		t.Fatal("a hook set after the cut did not run at once")
	}
	rd.cut(errTooSlow)
	if m.CutCount() != 0 || !errors.Is(rd.cutCause(), errShutdown) {
		t.Fatalf("a second cut: %d counted, cause %v", m.CutCount(), rd.cutCause())
	}
	rd.Close()
	quiet.Close()
	if _, err := m.Open("c", fi); apierr.CodeOf(err) != apierr.Unavailable {
		t.Fatalf("Open after Close: %v", err)
	}
}
