package zframe

import (
	"encoding/binary"
	"math/bits"
)

// The predefined distributions of RFC 8878 section 3.1.1.3.2.2 and
// their accuracy logs: literal lengths, match lengths, offsets.
var (
	llTable = newFSETable(6, []int16{4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
		2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1})
	mlTable = newFSETable(6, []int16{1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1})
	ofTable = newFSETable(5, []int16{1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
		1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1})
)

// Literal and match length codes (RFC 8878 section 3.1.1.3.2.1.1): the
// baseline and number of extra bits of each code past the ones that are
// their own value.
var (
	llBase = [36]uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
		16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}
	llBits = [36]uint8{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	mlBase = [53]uint32{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
		23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,
		35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539}
	mlBits = [53]uint8{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	// The code of each literal length and match length below 128 (plus
	// 3 for a match), with its baseline and extra bits.
	llSmall, mlSmall [128]lenCode
)

// lenCode is a length's code, its number of extra bits and its baseline.
type lenCode struct {
	code, nb uint8
	base     uint32
}

func init() {
	for c := len(llBase) - 1; c >= 0; c-- {
		for v := llBase[c]; v < llBase[c]+1<<llBits[c] && v < 128; v++ {
			llSmall[v] = lenCode{uint8(c), llBits[c], llBase[c]}
		}
	}
	for c := len(mlBase) - 1; c >= 0; c-- {
		for v := mlBase[c] - 3; v < mlBase[c]-3+1<<mlBits[c] && v < 128; v++ {
			mlSmall[v] = lenCode{uint8(c), mlBits[c], mlBase[c]}
		}
	}
}

func llCode(ll uint32) lenCode {
	if ll < 128 {
		return llSmall[ll]
	}
	c := bits.Len32(ll) - 1 + 19
	return lenCode{uint8(c), llBits[c], llBase[c]}
}

func mlCode(ml uint32) lenCode {
	if ml-3 < 128 {
		return mlSmall[ml-3]
	}
	c := bits.Len32(ml-3) - 1 + 36
	return lenCode{uint8(c), mlBits[c], mlBase[c]}
}

// step is one FSE encoding step: to code a symbol from the state the
// decoder reaches after it, write bits (nb of them) and go to state.
type step struct {
	state, nb uint8
	bits      uint16
}

// fseTable is a predefined FSE table seen from the encoder.
type fseTable struct {
	log   uint8
	steps [53 << 6]step // [symbol<<log | next state]
	first [53]uint8     // a state of each symbol, to start with
}

// newFSETable builds the decoding table of RFC 8878 section 4.1.1
// (symbols spread, each state's bits and baseline) and turns it
// around: each state of a symbol covers a range of next states.
func newFSETable(log uint8, norm []int16) fseTable {
	size := 1 << log
	syms := make([]uint8, size)
	next := make([]int, len(norm))
	high := size - 1
	for s, c := range norm {
		next[s] = int(c)
		if c == -1 {
			syms[high] = uint8(s)
			high--
			next[s] = 1
		}
	}
	skip := size>>1 + size>>3 + 3
	pos := 0
	for s, c := range norm {
		for range max(c, 0) {
			syms[pos] = uint8(s)
			pos = (pos + skip) & (size - 1)
			for pos > high {
				pos = (pos + skip) & (size - 1)
			}
		}
	}
	if pos != 0 {
		panic("zframe: a predefined distribution does not fill its table")
	}
	t := fseTable{log: log}
	for state := size - 1; state >= 0; state-- {
		t.first[syms[state]] = uint8(state)
	}
	for state := range size {
		s := int(syms[state])
		ns := next[s]
		next[s]++
		nb := int(log) + 1 - bits.Len(uint(ns))
		base := ns<<nb - size
		for x := base; x < base+1<<nb; x++ {
			t.steps[s<<log|x] = step{state: uint8(state), nb: uint8(nb), bits: uint16(x - base)}
		}
	}
	return t
}

// addBits adds the nb low bits of v (which has no others) to the bit
// container acc holding n bits; at most 64 bits may be held.
func addBits(acc uint64, n uint, v uint64, nb uint8) (uint64, uint) {
	return acc | v<<n, n + uint(nb)
}

// flushBits appends the whole bytes of acc to out, keeping the rest.
func flushBits(out []byte, acc uint64, n uint) ([]byte, uint64, uint) {
	out = binary.LittleEndian.AppendUint64(out, acc)
	out = out[:len(out)-8+int(n>>3)]
	return out, acc >> (n &^ 7), n & 7
}

// appendSequences appends the sequences section of seqs: their number,
// then, if there are any, the predefined mode for all three codes and
// the FSE bitstream, written from the last sequence to the first.
func appendSequences(dst []byte, seqs []seq) []byte {
	switch n := len(seqs); {
	case n == 0:
		return append(dst, 0) // and no Symbol_Compression_Modes byte

	case n < 128:
		dst = append(dst, byte(n))
	case n < 0x7F00:
		dst = append(dst, byte(n>>8)+128, byte(n))
	default:
		dst = append(dst, 255, byte(n-0x7F00), byte((n-0x7F00)>>8))
	}
	dst = append(dst, 0) // Predefined_Mode for literal lengths, offsets, match lengths
	// The bitstream is written forwards, and a decoder reads it backwards
	// from its last byte.
	var acc uint64
	var n uint
	var llState, mlState, ofState uint8
	for i := len(seqs) - 1; i >= 0; i-- {
		s := &seqs[i]
		llc, mlc := llCode(s.lit), mlCode(s.ml)
		ofv := s.ov
		ofc := uint8(bits.Len32(ofv) - 1)
		if i == len(seqs)-1 {
			llState, mlState, ofState = llTable.first[llc.code], mlTable.first[mlc.code], ofTable.first[ofc]
		} else {
			// The decoder updates states literal length, match length,
			// offset: written the other way round.
			st := ofTable.steps[uint(ofc)<<5|uint(ofState)]
			acc, n = addBits(acc, n, uint64(st.bits), st.nb)
			ofState = st.state
			st = mlTable.steps[uint(mlc.code)<<6|uint(mlState)]
			acc, n = addBits(acc, n, uint64(st.bits), st.nb)
			mlState = st.state
			st = llTable.steps[uint(llc.code)<<6|uint(llState)]
			acc, n = addBits(acc, n, uint64(st.bits), st.nb)
			llState = st.state
			if llc.nb+mlc.nb+ofc > 64-7-17 {
				dst, acc, n = flushBits(dst, acc, n)
			}
		}
		// The decoder reads extra bits offset, match length, literal length.
		acc, n = addBits(acc, n, uint64(s.lit-llc.base), llc.nb)
		acc, n = addBits(acc, n, uint64(s.ml-mlc.base), mlc.nb)
		acc, n = addBits(acc, n, uint64(ofv-1<<ofc), ofc)
		dst, acc, n = flushBits(dst, acc, n)
	}
	// Initial states, read literal length, offset, match length.
	acc, n = addBits(acc, n, uint64(mlState), 6)
	acc, n = addBits(acc, n, uint64(ofState), 5)
	acc, n = addBits(acc, n, uint64(llState), 6)
	acc, n = addBits(acc, n, 1, 1) // the end mark
	dst, acc, n = flushBits(dst, acc, n)
	if n > 0 {
		dst = append(dst, byte(acc))
	}
	return dst
}
