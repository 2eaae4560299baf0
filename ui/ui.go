// Package ui is the operator console: static HTML, CSS and JavaScript
// modules embedded in the binary and served on the admin listener under
// /ui/. The pages call the same JSON API as the CLI with the operator's
// bearer token; this package holds no rules of its own.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// Pages are the console's page paths under Prefix. Each loads the same
// shell directly (no hash routing); its script renders the page the
// address names.
var Pages = []string{"joins", "members", "inventory", "release-set", "releases", "tokens", "audit"}

// SecurityHeaders are set on every console answer. The CSP admits only
// the console's own files: no inline script or style, no third party.
// default-src does not cover framing, so X-Frame-Options forbids it.
var SecurityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'",
	"X-Content-Type-Options":  "nosniff",
	"X-Frame-Options":         "DENY",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-cache",
}

// file is one embedded file with its validator.
type file struct {
	body        []byte
	etag        string
	contentType string
}

// Handler serves the console. It answers paths under Prefix: the shell
// for "/ui/" and each page, the file for "/ui/assets/...", 404 otherwise.
func Handler() http.Handler {
	files := map[string]file{}
	err := eachFile(func(name string, b []byte) error {
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(name))
		if path.Ext(name) == ".js" {
			ct = "text/javascript; charset=utf-8" // the host's MIME table may lack it
		}
		files[name] = file{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		panic("ui: the embedded console cannot be read: " + err.Error()) // a build defect, caught by the package's tests
	}
	pages := map[string]bool{"": true}
	for _, p := range Pages {
		pages[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range SecurityHeaders {
			w.Header().Set(k, v)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel, ok := strings.CutPrefix(r.URL.Path, Prefix)
		name := "index.html"
		switch {
		case !ok:
			http.NotFound(w, r)
			return
		case pages[rel]:
		case strings.HasPrefix(rel, "assets/"):
			name = rel
		default:
			http.NotFound(w, r)
			return
		}
		f, found := files[name]
		if !found {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.contentType)
		w.Header().Set("ETag", f.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}

// eachFile calls fn with each embedded file's name (as served under
// Prefix) and content.
func eachFile(fn func(name string, body []byte) error) error {
	return fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(strings.TrimPrefix(p, "static/"), b)
	})
}
