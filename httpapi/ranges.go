package httpapi

import (
	"errors"
	"fmt"
	"strings"
)

// ByteRange is a resolved byte range: Length bytes from Start.
type ByteRange struct {
	Start, Length int64
}

// ContentRange is the Content-Range value of r within a file of size.
func (r ByteRange) ContentRange(size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", r.Start, r.Start+r.Length-1, size)
}

// Range header errors; serving answers both with 416.
var (
	ErrRangeMalformed     = errors.New("malformed Range header")
	ErrRangeUnsatisfiable = errors.New("range not satisfiable")
)

// maxRangeSpecs is how many range specs ParseRange looks at: two are
// enough to know a request asks for several ranges, which are answered
// with the whole file, so a header of ten thousand ranges costs two.
const maxRangeSpecs = 2

// ParseRange parses a Range header (RFC 9110 section 14) for a file of
// size bytes. It is strict and bounded:
//   - an empty header, or a unit other than "bytes", is no range: nil, nil;
//   - one spec ("a-b", "a-", "-n") is resolved against size, or is
//     ErrRangeUnsatisfiable (start at or past the end, "-0", any range of
//     an empty file) or ErrRangeMalformed (b < a, signs, spaces, no digits);
//   - several specs return the first two, syntax-checked and resolved
//     (an unsatisfiable one as the empty range at size): len > 1 tells the
//     caller to answer with the whole file. The rest is not parsed.
func ParseRange(header string, size int64) ([]ByteRange, error) {
	if header == "" {
		return nil, nil
	}
	unit, set, ok := strings.Cut(header, "=")
	if !ok {
		return nil, ErrRangeMalformed
	}
	if !strings.EqualFold(unit, "bytes") {
		return nil, nil
	}
	var ranges []ByteRange
	var unsatisfiable error
	for len(set) > 0 && len(ranges) < maxRangeSpecs {
		var spec string
		if i := strings.IndexByte(set, ','); i >= 0 {
			spec, set = set[:i], set[i+1:]
		} else {
			spec, set = set, ""
		}
		spec = strings.Trim(spec, " \t")
		if spec == "" {
			continue // empty list elements are allowed by the list syntax
		}
		r, err := parseSpec(spec, size)
		if errors.Is(err, ErrRangeUnsatisfiable) {
			unsatisfiable = err
			r = ByteRange{Start: size}
		} else if err != nil {
			return nil, err
		}
		ranges = append(ranges, r)
	}
	if len(ranges) == 0 {
		return nil, ErrRangeMalformed // "bytes=" or only commas
	}
	if len(ranges) == 1 && unsatisfiable != nil {
		return nil, unsatisfiable
	}
	return ranges, nil
}

func parseSpec(spec string, size int64) (ByteRange, error) {
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return ByteRange{}, ErrRangeMalformed
	}
	if first == "" { // suffix: the last n bytes
		n, ok := parseDigits(last)
		if !ok {
			return ByteRange{}, ErrRangeMalformed
		}
		if n == 0 || size == 0 {
			return ByteRange{}, ErrRangeUnsatisfiable
		}
		n = min(n, size)
		return ByteRange{Start: size - n, Length: n}, nil
	}
	start, ok := parseDigits(first)
	if !ok {
		return ByteRange{}, ErrRangeMalformed
	}
	end := int64(-1)
	if last != "" {
		if end, ok = parseDigits(last); !ok {
			return ByteRange{}, ErrRangeMalformed
		}
		if end < start {
			return ByteRange{}, ErrRangeMalformed
		}
	}
	if start >= size {
		return ByteRange{}, ErrRangeUnsatisfiable
	}
	if end < 0 || end >= size {
		end = size - 1
	}
	return ByteRange{Start: start, Length: end - start + 1}, nil
}

// parseDigits parses one or more ASCII digits. A value beyond int64
// saturates: it is past the end of any file, which is all that matters.
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	const limit = int64(1<<63-1) / 10
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > limit {
			v = 1<<63 - 1
			continue
		}
		v = v*10 + int64(c-'0')
		if v < 0 {
			v = 1<<63 - 1
		}
	}
	return v, true
}
