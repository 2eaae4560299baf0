package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"stratum/releaseset"
	"stratum/wire"
)

// TestReleaseSetETag: every coding of an unchanged set has its own strong
// ETag, If-None-Match answers 304 with no body, Content-Length is exact,
// and a record changes the tag.
func TestReleaseSetETag(t *testing.T) {
	f, svc := newReleaseSetFixture(t)
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
	if err := svc.Record("test", "n-none", wire.RecordRequest{}); err == nil {
		t.Fatal("a record of a non-member was accepted")
	}
	resp, _ := get("identity", tags["identity"])
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("a refused record changed the set: %d", resp.StatusCode)
	}
}

// TestReleaseSetViews: ?view=summary and ?limit=N&after=ID answer over
// HTTP with their own strong ETags (304 on a match), and a bad query is
// INVALID_INPUT naming its parameter.
func TestReleaseSetViews(t *testing.T) {
	f, _ := newReleaseSetFixture(t)
	admin := f.login()
	get := func(query, inm string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/admin/upgrades/release"+query, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Accept-Encoding", "identity")
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	tags := map[string]bool{}
	for _, q := range []string{"", "?view=summary", "?limit=10", "?view=full"} {
		resp, body := get(q, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", q, resp.StatusCode, body)
		}
		hasNodes := bytes.Contains(body, []byte(`"nodes":[`))
		hasSummary := bytes.Contains(body, []byte(`"summary":{`))
		if want := q != "?view=summary"; hasNodes != want {
			t.Errorf("%s: nodes[] present %v, want %v: %s", q, hasNodes, want, body)
		}
		if want := q != "?limit=10"; hasSummary != want {
			t.Errorf("%s: summary present %v, want %v: %s", q, hasSummary, want, body)
		}
		tag := resp.Header.Get("ETag")
		if q != "?view=full" && tags[tag] {
			t.Errorf("%s: ETag %s shared with another view", q, tag)
		}
		tags[tag] = true
		if resp, _ := get(q, tag); resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s If-None-Match %s: %d, want 304", q, tag, resp.StatusCode)
		}
	}
	for _, tc := range []struct{ query, field string }{
		{"?view=nodes", "view"}, {"?view=summary&limit=5", "view"}, {"?limit=x", "limit"},
		{"?limit=0", "limit"}, {"?limit=100000", "limit"}, {"?limit=5&after=n-nobody", "after"},
	} {
		resp, body := get(tc.query, "")
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(`"INVALID_INPUT"`)) || !bytes.Contains(body, []byte(`"field":"`+tc.field+`"`)) {
			t.Errorf("%s: %d %s, want 400 INVALID_INPUT at %s", tc.query, resp.StatusCode, body, tc.field)
		}
	}
}

// mustSet builds the release set service of a test.
func mustSet(cfg releaseset.Config) *releaseset.Service {
	s, err := releaseset.New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}
