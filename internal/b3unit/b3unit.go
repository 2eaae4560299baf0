// Package b3unit hashes whole 16 KiB units with BLAKE3, many at once:
// each unit is its own BLAKE3 input (the release mirror's sub-chunk
// index holds the hash of every 16 KiB of a file).
//
// lukechampine.com/blake3/guts compresses a unit's 16 chunks side by
// side (AVX-512, loading each message word of the 16 lanes with a gather
// instruction), then merges their 16 chaining values one unit at a time,
// eight parents at once with AVX2 (half the lanes idle above the first
// level) and the root alone in Go: the merge was 15-20% of a unit's hash.
// On amd64 with AVX-512, Sums compresses each unit's chunks with this
// package's assembly (sums_amd64.s, written by gen.go), which loads each
// lane's 64-byte block whole and transposes the 16 blocks with shuffles
// instead of 16 gathers, then merges up to 16 units together, level by
// level, 16 parents per compression: 15 compressions for 16 units' 240
// parents. 1.3-1.6 times guts' speed on the development machine's Xeon
// (BenchmarkSums). Elsewhere each unit goes through guts.
package b3unit

import (
	"encoding/binary"

	"lukechampine.com/blake3/guts"
)

// Size is a unit: 16 BLAKE3 chunks.
const Size = guts.MaxSIMD * guts.ChunkSize

// Sums writes the BLAKE3 hash of each 16 KiB unit of units (whose length
// is a multiple of Size) to out, 32 bytes a unit.
func Sums(out, units []byte) {
	if len(units)%Size != 0 || len(out) < len(units)/Size*32 {
		panic("b3unit: units not whole, or out too short")
	}
	if haveAVX512 {
		sumsAVX512(out, units)
		return
	}
	sumsGuts(out, units)
}

// sumsGuts is Sums one unit at a time through guts.
func sumsGuts(out, units []byte) {
	for i := 0; i < len(units); i += Size {
		n := guts.CompressBuffer((*[Size]byte)(units[i:i+Size]), Size, &guts.IV, 0, 0)
		n.Flags |= guts.FlagRoot
		words := guts.CompressNode(n)
		putWords(out[i/Size*32:], words[:8])
	}
}

func putWords(out []byte, words []uint32) {
	for i, w := range words {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
}
