package osrelease

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text, key, want string
		absent                bool
	}{
		{name: "plain", text: "ID=debian\n", key: "ID", want: "debian"},
		{name: "double quotes", text: `PRETTY_NAME="Debian GNU/Linux 13 (trixie)"`, key: "PRETTY_NAME", want: "Debian GNU/Linux 13 (trixie)"},
		{name: "single quotes", text: "IMAGE_VERSION='0.6.0'", key: "IMAGE_VERSION", want: "0.6.0"},
		{name: "escapes", text: `NAME="a \"b\" \\ \$c"`, key: "NAME", want: `a "b" \ $c`},
		{name: "unknown escape kept", text: `NAME="a\nb"`, key: "NAME", want: `a\nb`},
		{name: "comment", text: "#IMAGE_VERSION=1.0.0\n", key: "IMAGE_VERSION", absent: true},
		{name: "spaces around the line", text: "  IMAGE_VERSION=0.6.0  \r\n", key: "IMAGE_VERSION", want: "0.6.0"},
		{name: "empty value", text: "VARIANT=\n", key: "VARIANT", want: ""},
		{name: "unterminated quote", text: `IMAGE_VERSION="0.6.0`, key: "IMAGE_VERSION", absent: true},
		{name: "text after the closing quote", text: `IMAGE_VERSION="0.6.0"x`, key: "IMAGE_VERSION", absent: true},
		{name: "not an assignment", text: "IMAGE_VERSION 0.6.0\n", key: "IMAGE_VERSION", absent: true},
		{name: "bad key", text: "IMAGE-VERSION=0.6.0\n", key: "IMAGE-VERSION", absent: true},
		{name: "later line wins", text: "ID=a\nID=b\n", key: "ID", want: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse([]byte(tc.text))[tc.key]
			if tc.absent {
				if ok {
					t.Fatalf("%s = %q, want absent", tc.key, got)
				}
				return
			}
			if !ok || got != tc.want {
				t.Fatalf("%s = %q (present %v), want %q", tc.key, got, ok, tc.want)
			}
		})
	}
}

func TestReadOrder(t *testing.T) {
	root := t.TempDir()
	if got, err := Read(root); err != nil || len(got) != 0 {
		t.Fatalf("no file: %v %v, want an empty map", got, err)
	}
	write := func(rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("usr/lib/os-release", "IMAGE_VERSION=0.5.0\n")
	if got, _ := Read(root); got["IMAGE_VERSION"] != "0.5.0" {
		t.Fatalf("usr/lib fallback: %v", got)
	}
	write("etc/os-release", "IMAGE_VERSION=0.6.0\n")
	if got, _ := Read(root); got["IMAGE_VERSION"] != "0.6.0" {
		t.Fatalf("etc/os-release must win: %v", got)
	}
}

// FuzzParse: any bytes parse without a panic, and every key parsed is a
// valid key.
func FuzzParse(f *testing.F) {
	f.Add([]byte("NAME=\"Fedora\"\nIMAGE_VERSION='0.6.0'\n# c\n"))
	f.Add([]byte(`A="\"\\\$\` + "`" + `"`))
	f.Add([]byte("=\n\"\n'"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for k := range Parse(b) {
			if !validKey(k) {
				t.Fatalf("key %q", k)
			}
		}
	})
}
