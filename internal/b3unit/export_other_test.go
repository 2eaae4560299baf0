//go:build !amd64 || purego

package b3unit

import "testing"

func setAVX512(*testing.T, bool) {}
