package repo

import "testing"

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
