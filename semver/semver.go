// Package semver validates and orders release versions (semver.org
// 2.0.0, without a "v" prefix): one implementation for the cluster file,
// registrations, manifests, release records and the joiner.
package semver

import (
	"fmt"
	"strings"
)

// Valid reports whether v is a semantic version (semver.org 2.0.0,
// without a "v" prefix): MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
func Valid(v string) error {
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

// Compare orders two valid versions by semver precedence: build metadata
// is ignored, so 1.0.0+a and 1.0.0+b compare equal (a sort that needs a
// total order breaks the tie itself). Callers check validity first; an
// invalid version compares by its text.
func Compare(a, b string) int {
	if Valid(a) != nil || Valid(b) != nil {
		return strings.Compare(a, b)
	}
	return comparePrecedence(a, b)
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
