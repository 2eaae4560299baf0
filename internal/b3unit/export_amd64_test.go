//go:build !purego

package b3unit

import "testing"

// setAVX512 chooses the path for the rest of the test.
func setAVX512(t *testing.T, on bool) {
	was := haveAVX512
	haveAVX512 = on
	t.Cleanup(func() { haveAVX512 = was })
}

// BenchmarkParents16: one compression of 16 parent nodes.
func BenchmarkParents16(b *testing.B) {
	if !haveAVX512 {
		b.Skip("no AVX-512")
	}
	var in [32][8]uint32
	var out [16][8]uint32
	for b.Loop() {
		parents16(&out, &in, 4)
	}
}
