// Package osrelease reads os-release(5), the file every systemd-era OS
// ships to say what it is: the founder's own release record, the joiner's
// facts and the joiner's knowledge of its release (IMAGE_VERSION) use this
// one parser.
package osrelease

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxSize bounds what is read: a real os-release is well under 1 KiB, and
// the file lies on a disk this process does not control.
const maxSize = 64 << 10

// Paths are where os-release lives, relative to a root, in the order the
// standard says to look: /etc/os-release wins over /usr/lib/os-release.
var Paths = []string{"etc/os-release", "usr/lib/os-release"}

// Read parses the first of Paths that exists under root ("/" for this
// host). Neither existing is an empty map, not an error: a container or a
// minimal installer image may have none.
func Read(root string) (map[string]string, error) {
	for _, rel := range Paths {
		path := filepath.Join(root, rel)
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return map[string]string{}, err
		}
		b, err := io.ReadAll(io.LimitReader(f, maxSize))
		f.Close()
		if err != nil {
			return map[string]string{}, fmt.Errorf("%s: %w", path, err)
		}
		return Parse(b), nil
	}
	return map[string]string{}, nil
}

// Parse reads os-release text: KEY=VALUE lines, '#' comments and blank
// lines ignored, a value optionally in double or single quotes, with the
// shell escapes \" \\ \$ \` inside double quotes. A line that is not an
// assignment is skipped, as the standard asks of readers.
func Parse(b []byte) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || !validKey(key) {
			continue
		}
		if v, ok := unquote(value); ok {
			out[key] = v
		}
	}
	return out
}

func validKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return k != ""
}

// unquote undoes the quoting of one value; an unterminated quote makes the
// line unusable (false).
func unquote(v string) (string, bool) {
	if v == "" {
		return "", true
	}
	switch q := v[0]; q {
	case '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return "", false
		}
		return v[1 : len(v)-1], true
	case '"':
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				return b.String(), i == len(v)-1
			case c == '\\' && i+1 < len(v) && strings.IndexByte("\"\\$`", v[i+1]) >= 0:
				i++
				b.WriteByte(v[i])
			default:
				b.WriteByte(c)
			}
		}
		return "", false
	}
	return v, true
}
