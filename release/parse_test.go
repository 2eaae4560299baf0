package release_test

import (
	"cmp"
	"slices"
	"stratum/release"
	"stratum/release/releasetest"
	"strings"
	"testing"

	"stratum/semver"
)

const goodHash = "5819c8b565357d5d0318d7bca0d8e42def43b08884002cd91baaf62ac37b1451"

func manifestJSON(files string) string {
	return `{"schemaVersion":1,"release":"0.6.0","createdAt":"2025-01-02T03:04:05Z","upgradesFrom":["0.5.0"],` +
		`"os":{"imageVersion":"v0.6.0","layout":"3f1c0d77"},"files":[` + files + `],"sysext":[]}`
}

func fileJSON(path string, size int, hash string) string {
	return `{"path":"` + path + `","size":` + itoa(size) + `,"sha256":"` + hash + `"}`
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestParseManifest(t *testing.T) {
	good := fileJSON("os/a", 1, goodHash)
	if _, err := release.ParseManifest([]byte(manifestJSON(good))); err != nil {
		t.Fatalf("good manifest: %v", err)
	}
	sys := func(s string) string {
		return strings.Replace(manifestJSON(good+","+fileJSON("sysext/x.raw", 2, goodHash)), `"sysext":[]`, `"sysext":[`+s+`]`, 1)
	}
	if _, err := release.ParseManifest([]byte(sys(`{"name":"x","version":"1","path":"sysext/x.raw","rootHash":"abcd"}`))); err != nil {
		t.Fatalf("good sysext: %v", err)
	}
	cases := []struct {
		name, doc, want string
	}{
		{"unknown field", strings.Replace(manifestJSON(good), `"release"`, `"extra":1,"release"`, 1), `extra: unknown field`},
		{"field in wrong place", strings.Replace(manifestJSON(good), `"release"`, `"path":"x","release"`, 1), `path: unknown field`},
		{"case-folded field", strings.Replace(manifestJSON(good), `"release"`, `"Release"`, 1), `Release: unknown field`},
		{"duplicate field", strings.Replace(manifestJSON(good), `"release":"0.6.0"`, `"release":"0.6.0","release":"9.9.9"`, 1), `release: given twice`},
		{"trailing data", manifestJSON(good) + "{}", "after the JSON value"},
		{"schema 2", strings.Replace(manifestJSON(good), `"schemaVersion":1`, `"schemaVersion":2`, 1), "schemaVersion 2"},
		{"release not semver", strings.Replace(manifestJSON(good), `"0.6.0"`, `"v0.6"`, 1), "release"},
		{"release leading zero", strings.Replace(manifestJSON(good), `"0.6.0"`, `"0.06.0"`, 1), "leading zeros"},
		{"upgradesFrom bad", strings.Replace(manifestJSON(good), `["0.5.0"]`, `["0.5"]`, 1), "upgradesFrom[0]"},
		{"upgradesFrom self", strings.Replace(manifestJSON(good), `["0.5.0"]`, `["0.6.0"]`, 1), "release itself"},
		{"no createdAt", strings.Replace(manifestJSON(good), `"createdAt":"2025-01-02T03:04:05Z",`, ``, 1), "createdAt"},
		{"no files", manifestJSON(""), "no file"},
		{"dotdot", manifestJSON(fileJSON("os/../etc/passwd", 1, goodHash)), `"os/../etc/passwd"`},
		{"leading dotdot", manifestJSON(fileJSON("../x", 1, goodHash)), `".." element`},
		{"absolute", manifestJSON(fileJSON("/etc/passwd", 1, goodHash)), "absolute"},
		{"unclean", manifestJSON(fileJSON("os//a", 1, goodHash)), "not clean"},
		{"dot", manifestJSON(fileJSON("./os/a", 1, goodHash)), "not clean"},
		{"trailing slash", manifestJSON(fileJSON("os/a/", 1, goodHash)), "not clean"},
		{"backslash", manifestJSON(fileJSON(`os\\a`, 1, goodHash)), "backslash"},
		{"NUL", manifestJSON(fileJSON(`os/\u0000`, 1, goodHash)), "NUL"},
		{"empty path", manifestJSON(fileJSON("", 1, goodHash)), "empty path"},
		{"payload listed", manifestJSON(fileJSON(release.ManifestPath, 1, goodHash)), "payload file"},
		{"duplicate path", manifestJSON(good + "," + good), "os/a listed twice"},
		{"file and dir", manifestJSON(good + "," + fileJSON("os/a/b", 1, goodHash)), "both as a file and as a directory"},
		{"negative size", manifestJSON(fileJSON("os/a", -1, goodHash)), "negative size"},
		{"short hash", manifestJSON(fileJSON("os/a", 1, "abcd")), "os/a: sha256"},
		{"upper hash", manifestJSON(fileJSON("os/a", 1, strings.ToUpper(goodHash))), "lowercase hex"},
		{"size string", manifestJSON(`{"path":"os/a","size":"1","sha256":"` + goodHash + `"}`), "size"},
		{"sysext path unlisted", sys(`{"name":"x","version":"1","path":"sysext/y.raw","rootHash":"abcd"}`), "not in files"},
		{"sysext bad hash", sys(`{"name":"x","version":"1","path":"sysext/x.raw","rootHash":"xyz"}`), "rootHash"},
		{"sysext no name", sys(`{"name":"","version":"1","path":"sysext/x.raw","rootHash":"abcd"}`), "name"},
		{"not an object", `[1,2]`, "manifest.json"},
		{"empty", ``, "manifest.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := release.ParseManifest([]byte(c.doc))
			releasetest.MustContain(t, err, c.want)
		})
	}
}

func TestParseSignatures(t *testing.T) {
	id := strings.Repeat("ab", 32)
	sig := strings.Repeat("A", 86) + "=="
	good := `{"signatures":[{"keyId":"` + id + `","algorithm":"ed25519","signature":"` + sig + `"}]}`
	if _, err := release.ParseSignatures([]byte(good)); err != nil {
		t.Fatal(err)
	}
	other := `{"signatures":[{"keyId":"` + id + `","algorithm":"ml-dsa-65","signature":"AAAA"}]}`
	if _, err := release.ParseSignatures([]byte(other)); err != nil {
		t.Fatalf("another algorithm must parse (and not count): %v", err)
	}
	cases := []struct{ name, doc, want string }{
		{"empty", `{"signatures":[]}`, "no signature"},
		{"unknown field", strings.Replace(good, `"algorithm"`, `"x":1,"algorithm"`, 1), `signatures[0].x: unknown field`},
		{"short keyId", strings.Replace(good, id, "abcd", 1), "keyId"},
		{"bad base64", strings.Replace(good, sig, "!!!", 1), "not base64"},
		{"short signature", strings.Replace(good, sig, "AAAA", 1), "ed25519 signature of 3 bytes"},
		{"twice", strings.Replace(good, `}]}`, `},{"keyId":"`+id+`","algorithm":"ed25519","signature":"`+sig+`"}]}`, 1), "signs twice"},
		{"no algorithm", strings.Replace(good, `"ed25519"`, `""`, 1), "algorithm"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := release.ParseSignatures([]byte(c.doc))
			releasetest.MustContain(t, err, c.want)
		})
	}
}

func TestValidPath(t *testing.T) {
	for _, p := range []string{"a", "os/blobs/sha256/ab", "payload/manifest.json", "a..b", ".hidden", "x/...", "é/ü"} {
		if err := release.ValidPath(p); err != nil {
			t.Errorf("ValidPath(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"", "/", "/a", "..", "../a", "a/..", "a/../b", ".", "./a", "a/.", "a//b", "a/", `a\b`, "a\x00b",
		"a\nb", "\xff", strings.Repeat("a", 256), strings.Repeat("a/", 600) + "a"} {
		if err := release.ValidPath(p); err == nil {
			t.Errorf("ValidPath(%q) accepted", p)
		}
	}
}

func TestVersions(t *testing.T) {
	for _, v := range []string{"0.6.0", "1.2.3-rc.1", "1.2.3-rc.1+build.5", "10.20.30", "1.0.0-0A.is.legal", "1.0.0+0.build.1-rc.10000aaa-kk-0.1"} {
		if err := semver.Valid(v); err != nil {
			t.Errorf("semver.Valid(%q) = %v", v, err)
		}
	}
	for _, v := range []string{"", "v1.0.0", "1.0", "1.0.0.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0+", "1.0.0-a..b", "1.0.0 ", "1.0.0-é"} {
		if err := semver.Valid(v); err == nil {
			t.Errorf("semver.Valid(%q) accepted", v)
		}
	}
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.2.0", "1.10.0", "2.0.0"}
	shuffled := slices.Clone(order)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, func(a, b string) int { return cmp.Or(semver.Compare(a, b), strings.Compare(a, b)) })
	if !slices.Equal(order, shuffled) {
		t.Fatalf("semver order %v", shuffled)
	}
}
