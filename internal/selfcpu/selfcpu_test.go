package selfcpu

import (
	"crypto/sha256"
	"testing"
	"time"
)

// TestTotalCountsWork: CPU spent on this goroutine shows in Total. The
// work is fixed (hashing 256 MiB takes 100 ms or more of CPU), not timed,
// so a loaded machine only makes it slower.
func TestTotalCountsWork(t *testing.T) {
	before := Total()
	buf := make([]byte, 1<<20)
	for range 256 {
		sha256.Sum256(buf)
	}
	if got := Total() - before; got < 20*time.Millisecond {
		t.Fatalf("hashing 256 MiB counted %v of CPU", got)
	}
}
