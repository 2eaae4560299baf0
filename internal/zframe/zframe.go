// Package zframe writes zstd frames (RFC 8878) of byte strings that any
// zstd decoder reads, and that concatenate into one stream. Append's
// frame is compressed, its matches found by S2's snappy-compatible
// block encoder: S2 finds the repeats of a record full of hex digests in
// a third of the time zstd's fastest encoder takes to make its frame.
// The digests themselves are literals, which a Huffman table codes in
// about half their bytes: a record's frame is 3.8 KB where raw literals
// made it 5.4 KB (one bbolt page instead of two), for 21 us where they
// took 13 and zstd's fastest encoder with raw literals 19 (BenchmarkAppend).
// AppendRaw's frame is stored, for bytes not worth compressing.
//
// A frame is single segment with its content size, no checksum and no
// dictionary. Append encodes each block of at most 128 KiB of content on
// its own (matches stay inside it): its literals are Huffman coded with a
// table of the block's own where that is smaller, and its sequences are
// coded with the predefined FSE tables, an offset as a repeat code where
// it is one of the last three. A block that would not shrink is written
// raw, and empty content is one empty raw block.
package zframe

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/s2"
)

const (
	magic    = 0xFD2FB528
	maxBlock = 128 << 10
	minMatch = 3 // zstd's shortest match
)

// seq is one zstd sequence: lit literals, then ml bytes copied from off
// bytes back, off written as Offset_Value ov.
type seq struct {
	lit, ml, off, ov uint32
}

// scratch is one Append's working memory, pooled: steady state allocates
// nothing beyond growing dst.
type scratch struct {
	snappy []byte
	seqs   []seq
	rep    [3]uint32 // the frame's repeat offsets, newest first
	// huff codes a block's literals; each block has its own table
	// (ReusePolicyNone), so that every frame stands alone.
	huff huff0.Scratch
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{huff: huff0.Scratch{Reuse: huff0.ReusePolicyNone}}
}}

// Append appends one zstd frame of src to dst.
func Append(dst, src []byte) []byte {
	dst = appendHeader(dst, len(src))
	if len(src) == 0 {
		return appendBlockHeader(dst, true, blockRaw, 0)
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	sc.rep = [3]uint32{1, 4, 8}
	for len(src) > 0 {
		n := min(len(src), maxBlock)
		dst = sc.appendBlock(dst, src[:n], n == len(src))
		src = src[n:]
	}
	return dst
}

// AppendRaw appends p to dst as one zstd frame of raw (stored) blocks.
func AppendRaw(dst, p []byte) []byte {
	dst = appendHeader(dst, len(p))
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), maxBlock)
		dst = appendRaw(dst, p[:n], n == len(p))
		p = p[n:]
	}
	return dst
}

// RawSize is len(AppendRaw(nil, p)) for len(p) == n.
func RawSize(n int) int {
	size := 4 + 1
	switch {
	case n < 256:
		size++
	case n < 65536+256:
		size += 2
	case uint64(n) < 1<<32:
		size += 4
	default:
		size += 8
	}
	blocks := max(1, (n+maxBlock-1)/maxBlock)
	return size + 3*blocks + n
}

// appendHeader appends the magic number and a frame header for content
// of n bytes: single segment (the window is the content), no checksum,
// no dictionary, the content size in as few bytes as it fits.
func appendHeader(dst []byte, n int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, magic)
	switch {
	case n < 256:
		return append(dst, 0x20, byte(n))
	case n < 65536+256:
		return binary.LittleEndian.AppendUint16(append(dst, 0x60), uint16(n-256))
	case uint64(n) < 1<<32:
		return binary.LittleEndian.AppendUint32(append(dst, 0xA0), uint32(n))
	default:
		return binary.LittleEndian.AppendUint64(append(dst, 0xE0), uint64(n))
	}
}

const (
	blockRaw        = 0
	blockCompressed = 2
)

func appendBlockHeader(dst []byte, last bool, typ, size int) []byte {
	h := uint32(typ)<<1 | uint32(size)<<3
	if last {
		h |= 1
	}
	return append(dst, byte(h), byte(h>>8), byte(h>>16))
}

// appendBlock appends block b (at most maxBlock bytes) compressed, or
// raw where that would not be smaller.
func (sc *scratch) appendBlock(dst, b []byte, last bool) []byte {
	start := len(dst)
	rep := sc.rep // as it was, should the block be raw
	// The block header and the literals section's header (a
	// Raw_Literals_Block, its size in 3 bytes), filled in below.
	dst = append(dst, 0, 0, 0, 0, 0, 0)
	var seqs []seq
	sc.snappy = s2.EncodeSnappy(sc.snappy[:cap(sc.snappy)], b)
	if len(sc.snappy) < len(b) {
		var ok bool
		dst, seqs, ok = sc.parseSnappy(dst, b)
		sc.seqs = seqs
		if !ok {
			sc.rep = rep
			return appendRaw(dst[:start], b, last)
		}
	} else {
		// S2 found no repeats: the block is all literals, which the
		// Huffman coding may still shrink.
		dst = append(dst, b...)
	}
	dst = sc.codeLiterals(dst, start+3)
	dst = appendSequences(dst, seqs)
	size := len(dst) - start - 3
	if size >= len(b) {
		sc.rep = rep
		return appendRaw(dst[:start], b, last)
	}
	h := uint32(blockCompressed)<<1 | uint32(size)<<3
	if last {
		h |= 1
	}
	dst[start], dst[start+1], dst[start+2] = byte(h), byte(h>>8), byte(h>>16)
	return dst
}

func appendRaw(dst, b []byte, last bool) []byte {
	return append(appendBlockHeader(dst, last, blockRaw, len(b)), b...)
}

// Literals at most this long stay raw: a Huffman table costs more than
// it saves (zstd's own encoder draws the line at 16).
const minCodedLiterals = 32

// codeLiterals writes the literals section that starts at dst[at]: its
// 3-byte header, a Raw_Literals_Block's, is left for the literals that
// follow it to dst's end, which are coded with a Huffman table of their
// own (RFC 8878 section 3.1.1.3.1, a Compressed_Literals_Block: one
// stream below 1 KiB, four from there) where that makes the section
// smaller. Most of a record is hex digests, which S2 finds no matches
// in and Huffman codes in about half their bytes: a frame on disk and in
// the release set's memory is a third smaller.
func (sc *scratch) codeLiterals(dst []byte, at int) []byte {
	lits := dst[at+3:]
	n := len(lits)
	raw := func() []byte {
		dst[at], dst[at+1], dst[at+2] = byte(n<<4)|0x0C, byte(n>>4), byte(n>>12)
		return dst
	}
	if n < minCodedLiterals {
		return raw()
	}
	var out []byte
	var reused bool
	var err error
	single := n < 1024
	if single {
		out, reused, err = huff0.Compress1X(lits, &sc.huff)
	} else {
		out, reused, err = huff0.Compress4X(lits, &sc.huff)
	}
	// A reused table is not in out: never with ReusePolicyNone, and a
	// frame must carry its own.
	if err != nil || reused {
		return raw() // incompressible, or one byte repeated (rare in a record)
	}
	// The header: Literals_Block_Type 2 (compressed), Size_Format, then
	// Regenerated_Size and Compressed_Size in 10, 14 or 18 bits each
	// (four streams of fewer than 1 KiB would fit in 10: never made).
	var h uint64
	var hn int
	switch c := len(out); {
	case single:
		h, hn = 2|uint64(n)<<4|uint64(c)<<14, 3
	case n < 1<<14 && c < 1<<14:
		h, hn = 2|2<<2|uint64(n)<<4|uint64(c)<<18, 4
	default:
		h, hn = 2|3<<2|uint64(n)<<4|uint64(c)<<22, 5
	}
	if hn+len(out) >= 3+n {
		return raw()
	}
	dst = dst[:at]
	for i := range hn {
		dst = append(dst, byte(h>>(8*i)))
	}
	// out is the scratch's own memory, apart from the literals it
	// overwrites here.
	return append(dst, out...)
}

// offsetValue is the Offset_Value of a match off bytes back after lit
// literals (RFC 8878 section 3.1.1.5): a repeat code where off is one
// of rep, the last three offsets, else off plus 3. It updates rep as a
// decoder does.
func offsetValue(off, lit uint32, rep *[3]uint32) uint32 {
	// With no literals before it, codes 1 and 2 stand for the second
	// and third offsets, and the first has none.
	shift := uint32(0)
	if lit == 0 {
		shift = 1
	}
	switch {
	case off == rep[0] && shift == 0:
		return 1
	case off == rep[1]:
		rep[0], rep[1] = rep[1], rep[0]
		return 2 - shift
	case off == rep[2]:
		rep[0], rep[1], rep[2] = rep[2], rep[0], rep[1]
		return 3 - shift
	}
	rep[0], rep[1], rep[2] = off, rep[0], rep[1]
	return off + 3
}

// parseSnappy reads the snappy block sc.snappy of b into zstd
// sequences, in sc.seqs, and appends their literals and those after the
// last one to dst. Copies in a row with one offset become one sequence;
// a copy shorter than zstd's shortest match stays literals. Offsets are
// written as offsetValue says, from sc.rep. ok is false where the block
// is not one of b that this package can read (then b is written raw).
func (sc *scratch) parseSnappy(dst, b []byte) (_ []byte, _ []seq, ok bool) {
	seqs, enc, n := sc.seqs[:0], sc.snappy, len(b)
	size, k := binary.Uvarint(enc)
	if k <= 0 || size != uint64(n) {
		return dst, seqs, false
	}
	enc = enc[k:]
	pos, litStart := 0, 0 // in b
	for len(enc) > 0 {
		tag := enc[0]
		var length, off int
		switch tag & 3 {
		case 0: // literal
			l := int(tag >> 2)
			switch {
			case l < 60:
				enc = enc[1:]
			case l == 60 && len(enc) >= 2:
				l, enc = int(enc[1]), enc[2:]
			case l == 61 && len(enc) >= 3:
				l, enc = int(binary.LittleEndian.Uint16(enc[1:])), enc[3:]
			case l == 62 && len(enc) >= 4:
				l, enc = int(enc[1])|int(enc[2])<<8|int(enc[3])<<16, enc[4:]
			case l == 63 && len(enc) >= 5:
				l, enc = int(binary.LittleEndian.Uint32(enc[1:])), enc[5:]
			default:
				return dst, seqs, false
			}
			l++
			if l > len(enc) || l > n-pos {
				return dst, seqs, false
			}
			dst = append(dst, enc[:l]...)
			enc = enc[l:]
			pos += l
			continue
		case 1:
			if len(enc) < 2 {
				return dst, seqs, false
			}
			length, off = 4+int(tag>>2&7), int(tag&0xe0)<<3|int(enc[1])
			enc = enc[2:]
		case 2:
			if len(enc) < 3 {
				return dst, seqs, false
			}
			length, off = 1+int(tag>>2), int(binary.LittleEndian.Uint16(enc[1:]))
			enc = enc[3:]
		case 3:
			if len(enc) < 5 {
				return dst, seqs, false
			}
			length, off = 1+int(tag>>2), int(binary.LittleEndian.Uint32(enc[1:]))
			enc = enc[5:]
		}
		if off <= 0 || off > pos || length > n-pos {
			return dst, seqs, false
		}
		switch {
		case litStart == pos && len(seqs) > 0 && seqs[len(seqs)-1].off == uint32(off):
			seqs[len(seqs)-1].ml += uint32(length)
			litStart = pos + length
		case length < minMatch:
			dst = append(dst, b[pos:pos+length]...) // literals: litStart stays
		default:
			lit := uint32(pos - litStart)
			seqs = append(seqs, seq{lit: lit, ml: uint32(length), off: uint32(off), ov: offsetValue(uint32(off), lit, &sc.rep)})
			litStart = pos + length
		}
		pos += length
	}
	return dst, seqs, pos == n
}
