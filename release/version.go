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
