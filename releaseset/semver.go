package releaseset

import (
	"cmp"
	"strings"
)

// Releases are Semantic Versioning 2.0.0 strings without a "v" prefix
// ("0.2.0", "1.0.0-rc.1"). The module has no semver dependency and may not
// add one, so this is the small part of the spec the release set needs.

// semver is a parsed version; numeric parts stay decimal strings without
// leading zeros so that any size compares correctly.
type semver struct {
	core [3]string
	pre  []string
}

// parseSemver parses s; ok is false when s is not a semantic version.
func parseSemver(s string) (v semver, ok bool) {
	if i := strings.IndexByte(s, '+'); i >= 0 {
		if !validIdents(s[i+1:], false) {
			return v, false
		}
		s = s[:i]
	}
	if i := strings.IndexByte(s, '-'); i >= 0 {
		if !validIdents(s[i+1:], true) {
			return v, false
		}
		v.pre = strings.Split(s[i+1:], ".")
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		if !isNumeric(p) {
			return v, false
		}
		v.core[i] = p
	}
	return v, true
}

// validIdents checks dot-separated identifiers of [0-9A-Za-z-]; numeric
// ones in a pre-release may not have leading zeros.
func validIdents(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		digits := true
		for _, c := range id {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				digits = false
			default:
				return false
			}
		}
		if pre && digits && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// isNumeric: a non-empty run of digits without a leading zero.
func isNumeric(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// compareNum compares two numeric identifiers without leading zeros.
func compareNum(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// compareSemver orders by SemVer precedence: core numbers, then a version
// with a pre-release before the same one without, then identifier by
// identifier (numeric below alphanumeric). Build metadata is ignored.
func compareSemver(a, b semver) int {
	for i := range a.core {
		if c := compareNum(a.core[i], b.core[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, y := a.pre[i], b.pre[i]
		xn, yn := isNumeric(x), isNumeric(y)
		var c int
		switch {
		case xn && yn:
			c = compareNum(x, y)
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
	return cmp.Compare(len(a.pre), len(b.pre))
}
