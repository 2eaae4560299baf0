package repo

import (
	"bytes"
	"testing"
)

// TestDefaultCacheBytes: an eighth of the usable memory, in whole MiB,
// within 256 MiB and 2 GiB; unknown memory gives the floor.
func TestDefaultCacheBytes(t *testing.T) {
	for _, tc := range []struct {
		usable, want int64
	}{
		{0, MinDefaultCacheBytes},
		{1 << 30, MinDefaultCacheBytes},
		{2 << 30, MinDefaultCacheBytes},
		{4 << 30, 512 << 20},
		{4<<30 + 12345, 512 << 20},
		{6<<30 - 300<<20, 730 << 20}, // 5.7 GiB reported by MemTotal: 730.5 MiB, down to whole MiB
		{16 << 30, MaxDefaultCacheBytes},
		{24 << 30, MaxDefaultCacheBytes},
		{1 << 40, MaxDefaultCacheBytes},
	} {
		if got := defaultCacheFor(tc.usable); got != tc.want {
			t.Errorf("defaultCacheFor(%d) = %d, want %d", tc.usable, got, tc.want)
		}
	}
	if got := DefaultCacheBytes(); got < MinDefaultCacheBytes || got > MaxDefaultCacheBytes || got%(1<<20) != 0 {
		t.Errorf("DefaultCacheBytes() = %d on this machine", got)
	}
}

// TestCachedUnitsOfOneSlabAreOnePiece: units read in one system call and
// sent from the cache go out as one piece, exactly their verified bytes,
// whether this reader read them (its claim) or another did (hits); units
// of two reads are two pieces, and a piece never spans them.
func TestCachedUnitsOfOneSlabAreOnePiece(t *testing.T) {
	m, blob, data, _ := importedMirror(t, 2*ChunkSize, 4, 0)
	pieces := func(off, n int64) [][]byte {
		t.Helper()
		rd, err := openReader(t, m, blob)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		var got [][]byte
		at := off
		for b, err := range rd.Verified(off, off+n) {
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, data[at:at+int64(len(b))]) {
				t.Fatalf("[%d,+%d): wrong bytes at %d", off, n, at)
			}
			at += int64(len(b))
			got = append(got, b)
		}
		if at != off+n {
			t.Fatalf("[%d,+%d): %d bytes", off, n, at-off)
		}
		return got
	}
	const off, n = 3*SubChunkSize + 1000, 64 << 10 // five units, partial at both ends
	if got := pieces(off, n); len(got) != 1 {
		t.Fatalf("claimed units of one read: %d pieces, want 1", len(got))
	}
	if got := pieces(off, n); len(got) != 1 || m.CacheHits() != 5 {
		t.Fatalf("cached units of one read: %d pieces (%d hits), want 1 (5)", len(got), m.CacheHits())
	}
	// Units 8-9 read alone, then 7-10: 7 and 10 are claimed in two runs
	// of their own, 8-9 are one slab: four units, three pieces.
	pieces(8*SubChunkSize, 2*SubChunkSize)
	if got := pieces(7*SubChunkSize+5, 4*SubChunkSize-10); len(got) != 3 {
		t.Fatalf("units of three reads: %d pieces, want 3", len(got))
	}
}
