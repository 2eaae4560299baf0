package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"stratum/httpapi"
	"stratum/releaseset"
	"stratum/store"
)

// TestReleaseSetETag: every coding of an unchanged set has its own strong
// ETag, If-None-Match answers 304 with no body, Content-Length is exact,
// and a record changes the tag.
func TestReleaseSetETag(t *testing.T) {
	var svc *releaseset.Service
	f := newFixture(t, func(db *store.DB, d *httpapi.Deps) {
		svc = &releaseset.Service{DB: db, Now: time.Now, Node: "n-founder"}
		d.ReleaseSet = svc
	})
	admin := f.login()
	get := func(enc, inm string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/admin/upgrades/release", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Accept-Encoding", enc)
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	decode := func(enc string, b []byte) []byte {
		t.Helper()
		var r io.Reader
		switch enc {
		case "gzip":
			g, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			r = g
		case "zstd":
			z, err := zstd.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			defer z.Close()
			r = z
		default:
			return b
		}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tags := map[string]string{}
	var plain []byte
	for _, enc := range []string{"identity", "gzip", "zstd"} {
		resp, body := get(enc, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", enc, resp.StatusCode, body)
		}
		if resp.Header.Get("Content-Length") == "" || resp.ContentLength != int64(len(body)) {
			t.Errorf("%s: Content-Length %q for %d bytes", enc, resp.Header.Get("Content-Length"), len(body))
		}
		got := decode(enc, body)
		if plain == nil {
			plain = got
		} else if !bytes.Equal(plain, got) {
			t.Errorf("%s decodes to other bytes than identity", enc)
		}
		tag := resp.Header.Get("ETag")
		if len(tag) < 3 || tag[0] != '"' {
			t.Fatalf("%s: ETag %q is not a strong tag", enc, tag)
		}
		for other, o := range tags {
			if o == tag {
				t.Errorf("%s and %s share ETag %s", enc, other, tag)
			}
		}
		tags[enc] = tag
		resp, body = get(enc, tag)
		if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("%s If-None-Match %s: %d with %d bytes, want 304 and none", enc, tag, resp.StatusCode, len(body))
		}
		if resp, _ := get(enc, `"other", W/`+tag); resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s: a list holding the weak form of the tag: %d, want 304", enc, resp.StatusCode)
		}
	}
	// The founder is not a member of this bare store, so add nothing: a
	// new build of the answer still gives a new tag when the records move.
	if err := svc.Record("test", "n-none", releaseset.RecordRequest{}); err == nil {
		t.Fatal("a record of a non-member was accepted")
	}
	resp, _ := get("identity", tags["identity"])
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("a refused record changed the set: %d", resp.StatusCode)
	}
}
