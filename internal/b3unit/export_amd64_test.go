//go:build !purego

package b3unit

import "testing"

// setAVX512 chooses the path for the rest of the test.
func setAVX512(t *testing.T, on bool) {
	was := haveAVX512
	haveAVX512 = on
	t.Cleanup(func() { haveAVX512 = was })
}
