//go:build !purego

package b3unit

import (
	"golang.org/x/sys/cpu"
	"lukechampine.com/blake3/guts"
)

// haveAVX512 chooses the assembly (a variable: tests run both paths).
var haveAVX512 = cpu.X86.HasAVX512F

// chunks16 compresses the 16 chunks of unit (counters 0-15) into their
// chaining values.
//
//go:noescape
func chunks16(cvs *[16][8]uint32, unit *[Size]byte)

// parents16 compresses 16 parent nodes, node i's children in[2i] and
// in[2i+1], with flags (PARENT, and ROOT at the top) into out[i].
//
//go:noescape
func parents16(out *[16][8]uint32, in *[32][8]uint32, flags uint32)

// sumsAVX512 hashes up to 16 units at a time: their chunks, then their
// parents level by level, 16 at a time across units.
func sumsAVX512(out, units []byte) {
	// 16 units' 256 chaining values; the parents of a level are written
	// over the first half, a group at a time, in order (a group reads
	// 32 values from 2p and writes 16 at p, which no later group reads).
	// A level's last group may be partial: its idle lanes read values
	// past the level's end (older ones, or zero) and write past its
	// parents, into values this level already read.
	var cvs [16 * 16][8]uint32
	for len(units) > 0 {
		n := min(16, len(units)/Size)
		for u := range n {
			chunks16((*[16][8]uint32)(cvs[16*u:]), (*[Size]byte)(units[u*Size:]))
		}
		for width := 16 * n; width > n; width /= 2 {
			flags := uint32(guts.FlagParent)
			if width == 2*n {
				flags |= guts.FlagRoot
			}
			for p := 0; p < width/2; p += 16 {
				parents16((*[16][8]uint32)(cvs[p:]), (*[32][8]uint32)(cvs[2*p:]), flags)
			}
		}
		for u := range n {
			putWords(out[32*u:], cvs[u][:])
		}
		units, out = units[n*Size:], out[n*32:]
	}
}
