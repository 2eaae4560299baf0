package cli

import (
	"errors"
	"strconv"
	"strings"
)

// byteSize is a flag holding a number of bytes, written with an optional
// binary unit: 268435456, 256MiB, 256M, 1GiB, 1G, 512KiB, or 0.
type byteSize int64

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"kib", 10}, {"mib", 20}, {"gib", 30}, {"kb", 10}, {"mb", 20}, {"gb", 30}, {"k", 10}, {"m", 20}, {"g", 30}, {"b", 0}}

func (b *byteSize) String() string {
	switch n := int64(*b); {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	default:
		return strconv.FormatInt(n, 10)
	}
}

func (b *byteSize) Type() string { return "size" }

func (b *byteSize) Set(s string) error {
	digits, shift := strings.ToLower(strings.TrimSpace(s)), uint(0)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(digits, u.suffix); ok {
			digits, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	if err != nil || n > 1<<(63-shift)-1 {
		return errors.New("want a size such as 256MiB, 1GiB or 0")
	}
	*b = byteSize(n << shift)
	return nil
}
