package release_test

import (
	"bytes"
	"path"
	"stratum/release"
	"strings"
	"testing"
)

// The seed corpora live in testdata/fuzz/<Name>/; the f.Add seeds below
// are the minimum each target starts from.

func FuzzValidPath(f *testing.F) {
	for _, p := range []string{"os/blobs/sha256/ab", "../etc/passwd", "/abs", "a//b", "a/./b", `a\b`, "a\x00b", "payload/manifest.json", "...", ".hidden/x"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if release.ValidPath(p) != nil {
			return
		}
		if path.Clean(p) != p || path.IsAbs(p) || strings.ContainsAny(p, "\\\x00") || p == "." {
			t.Fatalf("ValidPath accepted %q", p)
		}
		for _, e := range strings.Split(p, "/") {
			if e == ".." || e == "." || e == "" {
				t.Fatalf("ValidPath accepted %q (element %q)", p, e)
			}
		}
		// What is valid stays inside any directory it is joined to.
		if j := path.Join("/root", p); !strings.HasPrefix(j, "/root/") {
			t.Fatalf("%q escapes: %s", p, j)
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(manifestJSON(fileJSON("os/a", 1, goodHash))))
	f.Add([]byte(manifestJSON(fileJSON("os/../a", 1, goodHash))))
	f.Add([]byte(`{"schemaVersion":1}`))
	f.Add([]byte(`{"schemaVersion":1,"schemaVersion":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := release.ParseManifest(b)
		if err != nil {
			return
		}
		for _, fl := range m.Files {
			if release.ValidPath(fl.Path) != nil || fl.Size < 0 || len(fl.SHA256) != 64 {
				t.Fatalf("accepted bad file %+v", fl)
			}
		}
		// What parses re-encodes to something that parses to the same.
		out, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := release.ParseManifest(out)
		if err != nil {
			t.Fatalf("re-encoded manifest does not parse: %v\n%s", err, out)
		}
		out2, _ := m2.Marshal()
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip differs:\n%s\n%s", out, out2)
		}
	})
}

func FuzzParseSignatures(f *testing.F) {
	id := strings.Repeat("ab", 32)
	f.Add([]byte(`{"signatures":[{"keyId":"` + id + `","algorithm":"ed25519","signature":"` + strings.Repeat("A", 86) + `=="}]}`))
	f.Add([]byte(`{"signatures":[{"keyId":"` + id + `","algorithm":"x","signature":"AAAA"}]}`))
	f.Add([]byte(`{"signatures":[]}`))
	f.Add([]byte(`{"signatures":null,"signatures":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := release.ParseSignatures(b)
		if err != nil {
			return
		}
		out, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := release.ParseSignatures(out); err != nil {
			t.Fatalf("re-encoded signatures do not parse: %v\n%s", err, out)
		}
		// Verifying against any keyring must not panic.
		pub := make([]byte, 32)
		k, _ := release.NewKeyring(1, pub)
		k.VerifyManifest([]byte("{}"), b)
	})
}
