package ui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every page path loads the shell directly, every answer carries the CSP,
// and nothing outside the console's own files is served.
func TestHandlerPathsAndHeaders(t *testing.T) {
	h := Handler()
	type pathCase struct {
		method, target string
		status         int
		contentType    string
	}
	cases := []pathCase{
		{"GET", "/ui/", 200, "text/html"},
		{"GET", "/ui/assets/js/app.js", 200, "text/javascript"},
		{"GET", "/ui/assets/app.css", 200, "text/css"},
		{"GET", "/ui/assets/favicon.svg", 200, "image/svg+xml"},
		{"HEAD", "/ui/joins", 200, "text/html"},
		{"GET", "/ui/nope", 404, ""},
		{"GET", "/ui/joins/extra", 404, ""},
		{"GET", "/ui/assets/../index.html", 404, ""},
		{"GET", "/ui/assets/%2e%2e/index.html", 404, ""},
		{"GET", "/ui/assets/js/", 404, ""},
		{"GET", "/ui/static/index.html", 404, ""},
		{"GET", "/elsewhere", 404, ""},
		{"POST", "/ui/joins", 405, ""},
	}
	for _, p := range Pages {
		cases = append(cases, pathCase{"GET", Prefix + p, 200, "text/html"})
	}
	for _, c := range cases {
		rec := get(t, h, c.method, c.target, nil)
		if rec.Code != c.status {
			t.Errorf("%s %s = %d, want %d", c.method, c.target, rec.Code, c.status)
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != "default-src 'self'" {
			t.Errorf("%s %s: CSP %q", c.method, c.target, got)
		}
		if rec.Header().Get("X-Frame-Options") != "DENY" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: framing or sniffing allowed: %v", c.method, c.target, rec.Header())
		}
		if c.contentType != "" && !strings.HasPrefix(rec.Header().Get("Content-Type"), c.contentType) {
			t.Errorf("%s %s: Content-Type %q, want %s", c.method, c.target, rec.Header().Get("Content-Type"), c.contentType)
		}
		if c.status == 200 && c.method == "GET" && rec.Body.Len() == 0 {
			t.Errorf("%s %s: empty body", c.method, c.target)
		}
	}
	page := get(t, h, "GET", "/ui/members", nil)
	if !strings.Contains(page.Body.String(), `src="/ui/assets/js/app.js"`) {
		t.Error("a page path does not load the console's script")
	}
	etag := page.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if rec := get(t, h, "GET", "/ui/joins", map[string]string{"If-None-Match": etag}); rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag = %d, want 304", rec.Code)
	}
}

// The CSP would block inline script and style in a browser; this finds
// them (and third-party URLs, eval and HTML parsing of strings) before
// one ships, file by file.
func TestNoInlineCodeOrThirdParty(t *testing.T) {
	forbidden := []struct {
		what string
		re   *regexp.Regexp
		in   string // file extension it applies to; "" all
	}{
		{"inline script", regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), ".html"},
		{"script without src", regexp.MustCompile(`<script(?:(?:\s+(?:type|defer|async)(?:="[^"]*")?)*)\s*>`), ".html"},
		{"style element", regexp.MustCompile(`<style`), ".html"},
		{"style attribute", regexp.MustCompile(`\sstyle=`), ".html"},
		{"event handler attribute", regexp.MustCompile(`\son[a-z]+=`), ".html"},
		{"third-party URL", regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`), ""},
		{"@import", regexp.MustCompile(`@import`), ".css"},
		{"innerHTML", regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write`), ".js"},
		{"eval", regexp.MustCompile(`\beval\(|new Function\(|setTimeout\(\s*['"]`), ".js"},
		{"style written from script", regexp.MustCompile(`\.style\b|setAttribute\(\s*['"]style`), ".js"},
	}
	n := 0
	err := eachFile(func(p string, b []byte) error {
		n++
		for _, f := range forbidden {
			if f.in != "" && path.Ext(p) != f.in {
				continue
			}
			// The SVG namespace is an identifier, never fetched.
			text := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "")
			if loc := f.re.FindStringIndex(text); loc != nil {
				t.Errorf("%s: %s at %q", p, f.what, text[loc[0]:min(loc[1]+20, len(text))])
			}
		}
		return nil
	})
	if err != nil || n < 10 {
		t.Fatalf("walked %d files: %v", n, err)
	}
}

// Every module import names an embedded file and each name it imports
// is exported there, so a typo fails here and not only in a browser
// (where a missing export stops every page, the sign-in too).
func TestModuleImportsResolve(t *testing.T) {
	imp := regexp.MustCompile(`(?m)^import\s+(?:([^'"]*)\s+from\s+)?['"]([^'"]+)['"]`)
	named := regexp.MustCompile(`^\{([^}]*)\}$`)
	export := regexp.MustCompile(`(?m)^export\s+(?:async\s+)?(?:function|const|let|class)\s+([A-Za-z_$][\w$]*)`)
	err := eachFile(func(p string, b []byte) error {
		if path.Ext(p) != ".js" {
			return nil
		}
		for _, m := range imp.FindAllStringSubmatch(string(b), -1) {
			what, from := strings.TrimSpace(m[1]), m[2]
			target := path.Join(path.Dir(p), from)
			if !strings.HasPrefix(from, ".") {
				t.Errorf("%s imports %q: only relative imports of embedded files", p, from)
				continue
			}
			src, err := fs.ReadFile(static, "static/"+target)
			if err != nil {
				t.Errorf("%s imports %q: %s is not embedded", p, from, target)
				continue
			}
			list := named.FindStringSubmatch(what)
			if list == nil {
				continue // import * as x, or a module run for its effect
			}
			exported := map[string]bool{}
			for _, e := range export.FindAllStringSubmatch(string(src), -1) {
				exported[e[1]] = true
			}
			for _, name := range strings.Split(list[1], ",") {
				name = strings.TrimSpace(strings.Split(strings.TrimSpace(name), " as ")[0])
				if name != "" && !exported[name] {
					t.Errorf("%s imports %s from %q, which does not export it", p, name, from)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
