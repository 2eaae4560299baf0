//go:build !amd64 || purego

package b3unit

const haveAVX512 = false

func sumsAVX512(out, units []byte) { sumsGuts(out, units) }
