//go:build ignore

// gen writes sums_amd64.s, the AVX-512 kernels of package b3unit:
//
//	go run gen.go > sums_amd64.s
//
// Both compress 16 BLAKE3 nodes at once, lane i of each 512-bit
// register holding node i's word: chunks16 the 16 chunks of one unit
// (16 blocks each, counters 0-15), parents16 16 parent nodes; each
// node's 64-byte block is loaded whole and the 16 transposed.
package main

import (
	"fmt"
	"os"
	"strings"
)

var b strings.Builder

func p(format string, args ...any) { fmt.Fprintf(&b, "\t"+format+"\n", args...) }

// msgPerm is BLAKE3's message permutation, applied after each round.
var msgPerm = [16]int{2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8}

// rounds writes the seven rounds on the state, word i in register
// Z(v[i]), with message word j in Z(m[j]), and leaves the chaining value
// (the first half of the state xor the second) in Z0-Z7, where v[0-7]
// must be.
func rounds(v, m [16]int) {
	z := func(i int) string { return fmt.Sprintf("Z%d", v[i]) }
	zm := func(r int) string { return fmt.Sprintf("Z%d", r) }
	g := func(a, bb, c, d, x, y int) {
		p("VPADDD %s, %s, %s", z(bb), z(a), z(a))
		p("VPADDD %s, %s, %s", zm(x), z(a), z(a))
		p("VPXORD %s, %s, %s", z(a), z(d), z(d))
		p("VPRORD $16, %s, %s", z(d), z(d))
		p("VPADDD %s, %s, %s", z(d), z(c), z(c))
		p("VPXORD %s, %s, %s", z(c), z(bb), z(bb))
		p("VPRORD $12, %s, %s", z(bb), z(bb))
		p("VPADDD %s, %s, %s", z(bb), z(a), z(a))
		p("VPADDD %s, %s, %s", zm(y), z(a), z(a))
		p("VPXORD %s, %s, %s", z(a), z(d), z(d))
		p("VPRORD $8, %s, %s", z(d), z(d))
		p("VPADDD %s, %s, %s", z(d), z(c), z(c))
		p("VPXORD %s, %s, %s", z(c), z(bb), z(bb))
		p("VPRORD $7, %s, %s", z(bb), z(bb))
	}
	for r := range 7 {
		fmt.Fprintf(&b, "\t// round %d\n", r+1)
		g(0, 4, 8, 12, m[0], m[1])
		g(1, 5, 9, 13, m[2], m[3])
		g(2, 6, 10, 14, m[4], m[5])
		g(3, 7, 11, 15, m[6], m[7])
		g(0, 5, 10, 15, m[8], m[9])
		g(1, 6, 11, 12, m[10], m[11])
		g(2, 7, 8, 13, m[12], m[13])
		g(3, 4, 9, 14, m[14], m[15])
		var next [16]int
		for i := range next {
			next[i] = m[msgPerm[i]]
		}
		m = next
	}
	// The chaining value: the first half of the state xor the second.
	for i := range 8 {
		p("VPXORD Z%d, Z%d, Z%d", v[i+8], v[i], v[i])
	}
}

// identity maps word i to register Z(base+i).
func identity(base int) (r [16]int) {
	for i := range r {
		r[i] = base + i
	}
	return r
}

// transpose loads the 64-byte block of each lane (lane i's at base +
// i*stride) and transposes them, with 64 shuffles, so that message word j
// of every lane is in one register; it returns those registers (m) and
// the 8 left free among Z8-Z31 (for the state's second half).
func transpose(base string, stride int) (m [16]int, free [8]int) {
	pool := []int{8, 9, 10, 11, 12, 13, 14, 15}
	alloc := func() int { r := pool[0]; pool = pool[1:]; return r }
	release := func(rs ...int) { pool = append(pool, rs...) }
	var r [16]int
	for i := range r {
		r[i] = 16 + i
		p("VMOVDQU32 %d(%s), Z%d", i*stride, base, r[i])
	}
	// Step 1: 32-bit interleave of row pairs; t[2k] = words 4L, 4L+1 of
	// rows 2k, 2k+1 in each 128-bit lane L, t[2k+1] words 4L+2, 4L+3.
	var t [16]int
	for k := range 8 {
		a, b := r[2*k], r[2*k+1]
		t[2*k], t[2*k+1] = alloc(), alloc()
		p("VPUNPCKLDQ Z%d, Z%d, Z%d", b, a, t[2*k])
		p("VPUNPCKHDQ Z%d, Z%d, Z%d", b, a, t[2*k+1])
		release(a, b)
	}
	// Step 2: 64-bit interleave; u[4k+m] lane L = word 4L+m of rows 4k-4k+3.
	var u [16]int
	for k := range 4 {
		for h := range 2 {
			a, b := t[4*k+h], t[4*k+h+2]
			u[4*k+2*h], u[4*k+2*h+1] = alloc(), alloc()
			p("VPUNPCKLQDQ Z%d, Z%d, Z%d", b, a, u[4*k+2*h])
			p("VPUNPCKHQDQ Z%d, Z%d, Z%d", b, a, u[4*k+2*h+1])
			release(a, b)
		}
	}
	// Steps 3 and 4: gather the 128-bit lanes; word 4L+w of all rows is
	// lane L of u[w], u[4+w], u[8+w], u[12+w].
	for w := range 4 {
		vlo, vhi, wlo, whi := alloc(), alloc(), alloc(), alloc()
		p("VSHUFI32X4 $0x44, Z%d, Z%d, Z%d", u[4+w], u[w], vlo)
		p("VSHUFI32X4 $0xee, Z%d, Z%d, Z%d", u[4+w], u[w], vhi)
		p("VSHUFI32X4 $0x44, Z%d, Z%d, Z%d", u[12+w], u[8+w], wlo)
		p("VSHUFI32X4 $0xee, Z%d, Z%d, Z%d", u[12+w], u[8+w], whi)
		release(u[w], u[4+w], u[8+w], u[12+w])
		for L, src := range [4][2]int{{vlo, wlo}, {vlo, wlo}, {vhi, whi}, {vhi, whi}} {
			imm := 0x88
			if L%2 == 1 {
				imm = 0xdd
			}
			m[4*L+w] = alloc()
			p("VSHUFI32X4 $0x%x, Z%d, Z%d, Z%d", imm, src[1], src[0], m[4*L+w])
		}
		release(vlo, vhi, wlo, whi)
	}
	copy(free[:], pool)
	return m, free
}

// stateIV fills the second half of the state v for a 64-byte block but
// for the counter's low word (v[12]) and the flags (v[15]), which the
// caller sets after.
func stateIV(v [16]int) {
	for i := range 4 {
		p("VPBROADCASTD iv<>+%d(SB), Z%d", 4*i, v[8+i])
	}
	p("VPBROADCASTD blockLen<>(SB), Z%d", v[14])
	p("VPXORD Z%d, Z%d, Z%d", v[13], v[13], v[13])
}

// state is v[0-7] in Z0-Z7 (the chaining value) and v[8-15] in free.
func state(free [8]int) (v [16]int) {
	for i := range 8 {
		v[i], v[8+i] = i, free[i]
	}
	return v
}

// scatter stores the chaining values Z0-Z7 of the 16 lanes to out (lane
// i's at out + 32*i).
func scatter(out string) {
	p("VMOVDQU32 seq<>(SB), Z8")
	p("VPSLLD $5, Z8, Z8")
	for i := range 8 {
		p("KXNORW K1, K1, K1")
		p("VPSCATTERDD Z%d, K1, %d(%s)(Z8*1)", i, 4*i, out)
	}
}

func loadIV() {
	for i := range 8 {
		p("VPBROADCASTD iv<>+%d(SB), Z%d", 4*i, i)
	}
}

func main() {
	b.WriteString("// Code generated by gen.go; DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n\n")
	ivs := []uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}
	for i, v := range ivs {
		fmt.Fprintf(&b, "DATA iv<>+%d(SB)/4, $0x%08x\n", 4*i, v)
	}
	b.WriteString("GLOBL iv<>(SB), RODATA|NOPTR, $32\n\n")
	for i := range 16 {
		fmt.Fprintf(&b, "DATA seq<>+%d(SB)/4, $%d\n", 4*i, i)
	}
	b.WriteString("GLOBL seq<>(SB), RODATA|NOPTR, $64\n\n")
	b.WriteString("DATA blockLen<>+0(SB)/4, $64\nGLOBL blockLen<>(SB), RODATA|NOPTR, $4\n\n")
	// Flags of block k of a chunk: CHUNK_START on the first, CHUNK_END on the last.
	for k := range 16 {
		f := 0
		if k == 0 {
			f |= 1
		}
		if k == 15 {
			f |= 2
		}
		fmt.Fprintf(&b, "DATA chunkFlags<>+%d(SB)/4, $%d\n", 4*k, f)
	}
	b.WriteString("GLOBL chunkFlags<>(SB), RODATA|NOPTR, $64\n\n")

	b.WriteString("// func chunks16(cvs *[16][8]uint32, unit *[16384]byte)\n")
	b.WriteString("// Requires: AVX512F\n")
	b.WriteString("TEXT ·chunks16(SB), NOSPLIT, $0-16\n")
	p("MOVQ cvs+0(FP), AX")
	p("MOVQ unit+8(FP), CX")
	p("LEAQ chunkFlags<>(SB), R8")
	p("XORQ DX, DX")
	loadIV()
	b.WriteString("block:\n")
	m, free := transpose("CX", 1024)
	v := state(free)
	stateIV(v)
	p("VMOVDQU32 seq<>(SB), Z%d", v[12])
	p("VPBROADCASTD (R8)(DX*4), Z%d", v[15])
	rounds(v, m)
	p("ADDQ $64, CX")
	p("INCQ DX")
	p("CMPQ DX, $16")
	p("JNE block")
	scatter("AX")
	p("VZEROUPPER")
	p("RET")
	b.WriteString("\n")

	b.WriteString("// func parents16(out *[16][8]uint32, in *[32][8]uint32, flags uint32)\n")
	b.WriteString("// Requires: AVX512F\n")
	b.WriteString("TEXT ·parents16(SB), NOSPLIT, $0-20\n")
	p("MOVQ out+0(FP), AX")
	p("MOVQ in+8(FP), CX")
	loadIV()
	m, free = transpose("CX", 64)
	v = state(free)
	stateIV(v)
	p("VPXORD Z%d, Z%d, Z%d", v[12], v[12], v[12])
	p("MOVL flags+16(FP), DX")
	p("VPBROADCASTD DX, Z%d", v[15])
	rounds(v, m)
	scatter("AX")
	p("VZEROUPPER")
	p("RET")
	os.Stdout.WriteString(b.String())
}
