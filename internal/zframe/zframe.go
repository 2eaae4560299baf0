// Package zframe writes zstd frames (RFC 8878) of byte strings that any
// zstd decoder reads, and that concatenate into one stream. Append's
// frame is compressed, its matches found by S2's snappy-compatible
// block encoder: S2 finds the repeats of a record full of hex digests in
// a third of the time zstd's fastest encoder takes to make its frame;
// the whole frame takes 70-90% of that encoder's time in a benchmark of
// its own (BenchmarkAppend) and half of it in the founder (33 us a
// record instead of 65, profiled at 30,000 records in a row).
// AppendRaw's frame is stored, for bytes not worth compressing.
//
// A frame is single segment with its content size, no checksum and no
// dictionary. Append encodes each block of at most 128 KiB of content on
// its own (matches stay inside it): its literals are left raw and its
// sequences are coded with the predefined FSE tables, an offset as a
// repeat code where it is one of the last three. A block that would not
// shrink is written raw, and empty content is one empty raw block.
package zframe

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/s2"
)

const (
	magic    = 0xFD2FB528
	maxBlock = 128 << 10
	minMatch = 3 // zstd's shortest match
)

// seq is one zstd sequence: lit literals from litPos, then ml bytes
// copied from off bytes back, off written as Offset_Value ov.
type seq struct {
	litPos, lit, ml, off, ov uint32
}

// scratch is one Append's working memory, pooled: steady state allocates
// nothing beyond growing dst.
type scratch struct {
	snappy []byte
	seqs   []seq
	rep    [3]uint32 // the frame's repeat offsets, newest first
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

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
	sc.snappy = s2.EncodeSnappy(sc.snappy[:cap(sc.snappy)], b)
	seqs, lits, ok := parseSnappy(sc.seqs[:0], sc.snappy, len(b))
	sc.seqs = seqs
	if !ok || len(seqs) == 0 {
		return appendRaw(dst, b, last)
	}
	rep := sc.rep // as it was, should the block be raw
	offsetValues(seqs, &sc.rep)
	start := len(dst)
	dst = appendBlockHeader(dst, last, blockCompressed, 0)
	// Literals section: Raw_Literals_Block, its size in 1, 2 or 3 bytes.
	switch {
	case lits < 32:
		dst = append(dst, byte(lits<<3))
	case lits < 4096:
		dst = append(dst, byte(lits<<4)|0x04, byte(lits>>4))
	default:
		dst = append(dst, byte(lits<<4)|0x0C, byte(lits>>4), byte(lits>>12))
	}
	end := 0
	for _, s := range seqs {
		dst = append(dst, b[s.litPos:s.litPos+s.lit]...)
		end = int(s.litPos + s.lit + s.ml)
	}
	dst = append(dst, b[end:]...)
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

// offsetValues sets each sequence's Offset_Value (RFC 8878 section
// 3.1.1.5): a repeat code where its offset is one of rep, the last
// three, else the offset plus 3; it keeps rep as a decoder does.
func offsetValues(seqs []seq, rep *[3]uint32) {
	for i := range seqs {
		s := &seqs[i]
		// With no literals before it, codes 1 and 2 stand for the
		// second and third offsets, and the first has none.
		shift := uint32(0)
		if s.lit == 0 {
			shift = 1
		}
		switch off := s.off; {
		case off == rep[0] && shift == 0:
			s.ov = 1
		case off == rep[1]:
			s.ov = 2 - shift
			rep[0], rep[1] = rep[1], rep[0]
		case off == rep[2]:
			s.ov = 3 - shift
			rep[0], rep[1], rep[2] = rep[2], rep[0], rep[1]
		default:
			s.ov = off + 3
			rep[0], rep[1], rep[2] = off, rep[0], rep[1]
		}
	}
}

// parseSnappy reads the snappy block enc of n bytes of content into
// zstd sequences, appended to seqs, and the number of literal bytes
// (those of the sequences and those after the last one). Copies in a
// row with one offset become one sequence; a copy shorter than zstd's
// shortest match stays literals. ok is false where enc is not a block
// of n bytes this package can read (then the block is written raw).
func parseSnappy(seqs []seq, enc []byte, n int) (_ []seq, lits int, ok bool) {
	size, k := binary.Uvarint(enc)
	if k <= 0 || size != uint64(n) {
		return seqs, 0, false
	}
	enc = enc[k:]
	pos, litStart := 0, 0 // in the content
	matched := 0
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
				return seqs, 0, false
			}
			l++
			if l > len(enc) || l > n-pos {
				return seqs, 0, false
			}
			enc = enc[l:]
			pos += l
			continue
		case 1:
			if len(enc) < 2 {
				return seqs, 0, false
			}
			length, off = 4+int(tag>>2&7), int(tag&0xe0)<<3|int(enc[1])
			enc = enc[2:]
		case 2:
			if len(enc) < 3 {
				return seqs, 0, false
			}
			length, off = 1+int(tag>>2), int(binary.LittleEndian.Uint16(enc[1:]))
			enc = enc[3:]
		case 3:
			if len(enc) < 5 {
				return seqs, 0, false
			}
			length, off = 1+int(tag>>2), int(binary.LittleEndian.Uint32(enc[1:]))
			enc = enc[5:]
		}
		if off <= 0 || off > pos || length > n-pos {
			return seqs, 0, false
		}
		switch {
		case litStart == pos && len(seqs) > 0 && seqs[len(seqs)-1].off == uint32(off):
			seqs[len(seqs)-1].ml += uint32(length)
			matched += length
			litStart = pos + length
		case length < minMatch:
			// literals: litStart stays
		default:
			seqs = append(seqs, seq{litPos: uint32(litStart), lit: uint32(pos - litStart), ml: uint32(length), off: uint32(off)})
			matched += length
			litStart = pos + length
		}
		pos += length
	}
	if pos != n {
		return seqs, 0, false
	}
	return seqs, n - matched, true
}
