package b3unit

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
	"lukechampine.com/blake3"
	"lukechampine.com/blake3/guts"
)

// paths are the ways Sums may compute, each checked where this CPU
// allows (the assembly needs amd64 with AVX-512).
func paths(t *testing.T) map[string]bool {
	t.Logf("GOARCH=%s avx512f=%v", runtime.GOARCH, cpu.X86.HasAVX512F)
	p := map[string]bool{"guts": false}
	if cpu.X86.HasAVX512F && haveAVX512 {
		p["avx512"] = true
	}
	return p
}

func withPath(t *testing.T, avx512 bool) {
	if !avx512 {
		setAVX512(t, false)
	}
}

// TestSumsOfficialVector: the official BLAKE3 test vector of 16,384
// bytes (input byte i is i mod 251), by every path, alone and as every
// unit of a batch.
func TestSumsOfficialVector(t *testing.T) {
	const want = "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4"
	unit := make([]byte, Size)
	for i := range unit {
		unit[i] = byte(i % 251)
	}
	for name, avx := range paths(t) {
		t.Run(name, func(t *testing.T) {
			withPath(t, avx)
			for _, n := range []int{1, 5, 16, 17, 40} {
				units := bytes.Repeat(unit, n)
				out := make([]byte, 32*n)
				Sums(out, units)
				for u := range n {
					if got := fmt.Sprintf("%x", out[32*u:32*u+32]); got != want {
						t.Fatalf("%d units, unit %d: %s, want %s", n, u, got, want)
					}
				}
			}
		})
	}
}

// TestSumsMatchPortableBLAKE3: on random units, for every batch length
// from 1 to 70 (whole groups of 16 and partial ones), each unit's hash
// by every path equals BLAKE3 computed by guts' portable code one chunk
// and one parent at a time, and blake3.Sum256; a flipped byte changes
// its own unit's hash only.
func TestSumsMatchPortableBLAKE3(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 70*Size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	want := make([][32]byte, 70)
	for u := range want {
		want[u] = portable(data[u*Size : (u+1)*Size])
		if s := blake3.Sum256(data[u*Size : (u+1)*Size]); s != want[u] {
			t.Fatalf("unit %d: blake3.Sum256 %x, portable %x", u, s, want[u])
		}
	}
	for name, avx := range paths(t) {
		t.Run(name, func(t *testing.T) {
			withPath(t, avx)
			for n := 1; n <= 70; n++ {
				off := rng.IntN(70 - n + 1)
				out := make([]byte, 32*n+7)
				Sums(out, data[off*Size:(off+n)*Size])
				for u := range n {
					if !bytes.Equal(out[32*u:32*u+32], want[off+u][:]) {
						t.Fatalf("%d units from %d: unit %d is %x, want %x", n, off, u, out[32*u:32*u+32], want[off+u])
					}
				}
				if !bytes.Equal(out[32*n:], make([]byte, 7)) {
					t.Fatalf("%d units: wrote past the sums", n)
				}
			}
			flipped := bytes.Clone(data[:20*Size])
			flipped[13*Size+1000] ^= 1
			out := make([]byte, 20*32)
			Sums(out, flipped)
			for u := range 20 {
				if changed := !bytes.Equal(out[32*u:32*u+32], want[u][:]); changed != (u == 13) {
					t.Fatalf("a byte flipped in unit 13: unit %d changed %v", u, changed)
				}
			}
		})
	}
}

// portable is BLAKE3 of one unit by guts' portable code, a chunk and a
// parent at a time.
func portable(unit []byte) (sum [32]byte) {
	var cvs [][8]uint32
	for c := range Size / guts.ChunkSize {
		cvs = append(cvs, guts.ChainingValue(guts.CompressChunk(unit[c*guts.ChunkSize:(c+1)*guts.ChunkSize], &guts.IV, uint64(c), 0)))
	}
	for len(cvs) > 2 {
		var up [][8]uint32
		for i := 0; i < len(cvs); i += 2 {
			up = append(up, guts.ChainingValue(guts.ParentNode(cvs[i], cvs[i+1], &guts.IV, 0)))
		}
		cvs = up
	}
	root := guts.ParentNode(cvs[0], cvs[1], &guts.IV, 0)
	root.Flags |= guts.FlagRoot
	out := guts.WordsToBytes(guts.CompressNode(root))
	copy(sum[:], out[:])
	return sum
}

func BenchmarkSums(b *testing.B) {
	for _, n := range []int{1, 4, 5, 16, 64} {
		units := make([]byte, n*Size)
		for i := range units {
			units[i] = byte(i * 7)
		}
		out := make([]byte, 32*n)
		b.Run(fmt.Sprintf("units=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(units)))
			for b.Loop() {
				Sums(out, units)
			}
		})
		b.Run(fmt.Sprintf("units=%d/guts", n), func(b *testing.B) {
			b.SetBytes(int64(len(units)))
			for b.Loop() {
				sumsGuts(out, units)
			}
		})
	}
}
