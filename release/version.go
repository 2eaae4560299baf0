package release

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxPathLen and maxElemLen bound a manifest path: real release trees are
// far below them, and hostile ones must not cost unbounded work.
const (
	maxPathLen = 1024
	maxElemLen = 255
)

// ValidPath reports whether p may name a file of a release: relative,
// slash-separated, clean (path.Clean(p) == p), with no "." or ".." element,
// no backslash, NUL or control character, valid UTF-8 and of bounded
// length. Serving calls it before anything else, so a hostile path never
// reaches the file system.
func ValidPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case len(p) > maxPathLen:
		return fmt.Errorf("path longer than %d bytes", maxPathLen)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not valid UTF-8", p)
	case p[0] == '/':
		return fmt.Errorf("path %q is absolute", p)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0:
			return fmt.Errorf("path %q contains NUL", p)
		case c == '\\':
			return fmt.Errorf("path %q contains a backslash", p)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("path %q contains a control character", p)
		}
	}
	// Checking the elements one by one is path.Clean(p) == p without its
	// allocation: no empty element (// or a trailing /), no "." and no "..".
	for elem := range strings.SplitSeq(p, "/") {
		switch {
		case elem == "":
			return fmt.Errorf("path %q is not clean (empty element)", p)
		case elem == ".":
			return fmt.Errorf("path %q is not clean (\".\" element)", p)
		case elem == "..":
			return fmt.Errorf("path %q has a \"..\" element", p)
		case len(elem) > maxElemLen:
			return fmt.Errorf("path %q has an element longer than %d bytes", p, maxElemLen)
		}
	}
	return nil
}

// ValidVersion reports whether v is a semantic version (semver.org 2.0.0,
// without a "v" prefix): MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
func ValidVersion(v string) error {
	if v == "" {
		return fmt.Errorf("empty version")
	}
	if len(v) > 128 {
		return fmt.Errorf("version longer than 128 bytes")
	}
	core, build, hasBuild := strings.Cut(v, "+")
	core, pre, hasPre := strings.Cut(core, "-")
	nums := strings.Split(core, ".")
	if len(nums) != 3 {
		return fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", v)
	}
	for _, n := range nums {
		if !numericIdent(n) {
			return fmt.Errorf("version %q: %q is not a number without leading zeros", v, n)
		}
	}
	if hasPre {
		for id := range strings.SplitSeq(pre, ".") {
			if !alnumIdent(id) {
				return fmt.Errorf("version %q: bad pre-release identifier %q", v, id)
			}
			if allDigits(id) && !numericIdent(id) {
				return fmt.Errorf("version %q: numeric pre-release identifier %q has a leading zero", v, id)
			}
		}
	}
	if hasBuild {
		for id := range strings.SplitSeq(build, ".") {
			if !alnumIdent(id) {
				return fmt.Errorf("version %q: bad build identifier %q", v, id)
			}
		}
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func numericIdent(s string) bool {
	return allDigits(s) && (s == "0" || s[0] != '0')
}

func alnumIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// compareVersions orders two valid versions by semver precedence (build
// metadata ignored); ties are broken by the raw strings so sorting is total.
func compareVersions(a, b string) int {
	if c := comparePrecedence(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func comparePrecedence(a, b string) int {
	a, _, _ = strings.Cut(a, "+")
	b, _, _ = strings.Cut(b, "+")
	ac, apre, aHasPre := strings.Cut(a, "-")
	bc, bpre, bHasPre := strings.Cut(b, "-")
	an, bn := strings.Split(ac, "."), strings.Split(bc, ".")
	for i := 0; i < len(an) && i < len(bn); i++ {
		if c := compareNumeric(an[i], bn[i]); c != 0 {
			return c
		}
	}
	switch {
	case !aHasPre && !bHasPre:
		return 0
	case !aHasPre:
		return 1 // a release ranks above its pre-releases
	case !bHasPre:
		return -1
	}
	ai, bi := strings.Split(apre, "."), strings.Split(bpre, ".")
	for i := 0; i < len(ai) && i < len(bi); i++ {
		x, y := ai[i], bi[i]
		xn, yn := allDigits(x), allDigits(y)
		var c int
		switch {
		case xn && yn:
			c = compareNumeric(x, y)
		case xn:
			c = -1
		case yn:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return len(ai) - len(bi)
}

// compareNumeric compares decimal strings without leading zeros of any
// length, so a 30-digit version number cannot overflow anything.
func compareNumeric(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
