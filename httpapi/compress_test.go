package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// TestWriteShared: a body shared by many requests is answered in the
// coding each client accepts, compressed once per body, and as it is to
// a client that accepts none; every answer opens to the same bytes.
func TestWriteShared(t *testing.T) {
	var forms encodedLast
	body := bytes.Repeat([]byte(`{"nodeId":"n-00000001","role":"worker","state":"active"},`), 50)
	open := map[string]func(io.Reader) (io.Reader, error){
		"": func(r io.Reader) (io.Reader, error) { return r, nil },
		"gzip": func(r io.Reader) (io.Reader, error) {
			return gzip.NewReader(r)
		},
		"zstd": func(r io.Reader) (io.Reader, error) {
			d, err := zstd.NewReader(r)
			return d, err
		},
	}
	answer := func(accept string, body []byte) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/v1/cluster/members", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		rec := httptest.NewRecorder()
		if err := writeShared(rec, req, body, &forms); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	for _, tc := range []struct{ accept, want string }{{"", ""}, {"gzip", "gzip"}, {"gzip, zstd", "zstd"}, {"zstd;q=0, gzip", "gzip"}} {
		rec := answer(tc.accept, body)
		if enc := rec.Header().Get("Content-Encoding"); enc != tc.want || rec.Code != http.StatusOK {
			t.Fatalf("%q: %d coded %q, want %q", tc.accept, rec.Code, enc, tc.want)
		}
		if n, _ := strconv.Atoi(rec.Header().Get("Content-Length")); n != rec.Body.Len() {
			t.Fatalf("%q: Content-Length %d for %d bytes", tc.accept, n, rec.Body.Len())
		}
		r, err := open[tc.want](bytes.NewReader(rec.Body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%q: opens to %d bytes (%v), want the body", tc.accept, len(got), err)
		}
		if tc.want != "" && rec.Body.Len() >= len(body) {
			t.Fatalf("%q: %d bytes compressed from %d", tc.accept, rec.Body.Len(), len(body))
		}
	}
	// The same body again: the form made before, not made again.
	first, _ := forms.form(body, "gzip")
	if again, _ := forms.form(body, "gzip"); &again[0] != &first[0] {
		t.Fatal("the gzip form of one body was made twice")
	}
	// Another body (the next list): its own form.
	next := append([]byte(nil), body...)
	next[2] = 'N'
	rec := answer("gzip", next)
	r, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r); !bytes.Equal(got, next) {
		t.Fatal("the next body was answered with the last one's form")
	}
}
