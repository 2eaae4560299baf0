package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/release/releasetest"
	"stratum/release/repo"
	"stratum/store/storetest"
)

func FuzzParseRange(f *testing.F) {
	for _, h := range []string{"bytes=0-0", "bytes=-10", "bytes=5-", "bytes=0-1,5-6", "bytes=9-1", "bytes=99999999999999999999-", "items=1-2", "bytes=,,", "bytes= 1 - 2"} {
		f.Add(h, int64(1000))
	}
	f.Add("bytes=-1", int64(0))
	f.Fuzz(func(t *testing.T, header string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		ranges, err := ParseRange(header, size)
		if err != nil {
			if ranges != nil {
				t.Fatalf("ranges %v with error %v", ranges, err)
			}
			return
		}
		if len(ranges) > maxRangeSpecs {
			t.Fatalf("%d ranges: parsing must stop at %d", len(ranges), maxRangeSpecs)
		}
		for _, r := range ranges {
			if r.Start < 0 || r.Length < 0 || r.Start > size || r.Length > size-r.Start {
				t.Fatalf("range %+v outside a file of %d bytes", r, size)
			}
		}
		if len(ranges) == 1 && ranges[0].Length == 0 {
			t.Fatalf("single empty range %+v", ranges[0])
		}
	})
}

// FuzzETagHeaders checks the If-None-Match and If-Range helpers alone:
// a match needs "*" or the tag itself in the list; the tag listed first,
// weak or strong, always matches; If-Range honors exactly our strong tag.
func FuzzETagHeaders(f *testing.F) {
	etag := `"sha256:` + strings.Repeat("ab", 32) + `"`
	for _, s := range []string{``, `*`, etag, `W/` + etag, `"x", ` + etag, `"a,b", "c"`, ` , ,"y",W/"z" `, `W/`, `"`, `""`, `W/W/"x"`, "\t" + etag + "\t", `Wed, 21 Oct 2015 07:28:00 GMT`} {
		f.Add(s, etag)
	}
	f.Add(`"x"`, `"x"`)
	f.Fuzz(func(t *testing.T, list, tag string) {
		got := etagListMatches(list, tag)
		if got && !strings.Contains(list, "*") && !strings.Contains(list, tag) {
			t.Fatalf("etagListMatches(%q, %q) without the tag or *", list, tag)
		}
		// A well-formed tag ("..." without inner quotes) listed first matches.
		if len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"' && !strings.Contains(tag[1:len(tag)-1], `"`) {
			if !etagListMatches(tag+", "+list, tag) || !etagListMatches("W/"+tag+","+list, tag) {
				t.Fatalf("tag %q listed first does not match (rest %q)", tag, list)
			}
		}
		want := strings.Trim(list, " \t") == "" || strings.Trim(list, " \t") == tag
		if ifRangeAllows(list, tag) != want {
			t.Fatalf("ifRangeAllows(%q, %q) = %v", list, tag, !want)
		}
	})
}

// FuzzServeHeaders sends GET and HEAD requests with fuzzed Range,
// If-Range and If-None-Match headers and paths to ServeFile over an
// imported release and checks the answer against the file: 304 only for
// a matching If-None-Match, 206 with exactly the bytes of its
// Content-Range, 200 with the whole file, 416 with "bytes */size",
// 404 for a path not in the release; never another error.
func FuzzServeHeaders(f *testing.F) {
	src, blob, pub := releasetest.SignedTree(f, 2*repo.ChunkSize+5, "0.6.0")
	keys := releasetest.Keyring(f, 1, pub)
	db, dataDir := storetest.Temp(f)
	m, err := repo.New(repo.Config{DB: db, DataDir: dataDir, Keys: keys, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := m.Import(context.Background(), src, repo.ImportOptions{}); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(m.Close)
	files := []string{blob, "os/index.json", "os/empty", "sysext/stratum-ovs_3.5.3-5.el10s.raw"}
	data := map[string][]byte{}
	for _, p := range files {
		b, err := os.ReadFile(filepath.Join(src, p))
		if err != nil {
			f.Fatal(err)
		}
		data[p] = b
	}
	etagOf := func(p string) string { return `"sha256:` + hashOf(data[p]) + `"` }
	for _, h := range []string{"bytes=0-0", "bytes=-10", "bytes=5-", "bytes=0-1,5-6", "bytes=9-1", "bytes=1048570-1048590", "bytes=99999999-", "items=1-2", ""} {
		f.Add(uint8(0), "", h, "", "", false)
		f.Add(uint8(0), "", h, etagOf(blob), "", false)
		f.Add(uint8(3), "", h, `W/`+etagOf(files[3]), "", true)
	}
	f.Add(uint8(0), "", "bytes=0-0", "", etagOf(blob), false)
	f.Add(uint8(1), "", "", "", "*", false)
	f.Add(uint8(2), "", "bytes=0-0", "", "", false)
	f.Add(uint8(4), "os/../os/index.json", "", "", "", false)
	f.Add(uint8(4), "release.sig", "bytes=0-", "", "", true)
	f.Fuzz(func(t *testing.T, sel uint8, path, rangeH, ifRange, inm string, head bool) {
		if int(sel) < len(files) {
			path = files[sel]
		}
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		r := httptest.NewRequest(method, "/", nil)
		if rangeH != "" {
			r.Header.Set("Range", rangeH)
		}
		if ifRange != "" {
			r.Header.Set("If-Range", ifRange)
		}
		if inm != "" {
			r.Header.Set("If-None-Match", inm)
		}
		w := httptest.NewRecorder()
		err := ServeReleaseFile(w, r, m, "reg", "0.6.0", path)
		content, known := data[path]
		if err != nil {
			e, ok := apierr.As(err)
			switch {
			case !ok:
				t.Fatalf("%s %q: error %v is not an API error", method, path, err)
			case e.Code == apierr.NotFound:
				if known {
					t.Fatalf("%q of the release is NOT_FOUND", path)
				}
			case e.Code == apierr.RangeNotSatisfiable:
				if !known || rangeH == "" {
					t.Fatalf("416 for %q range %q", path, rangeH)
				}
				if cr := w.Header().Get("Content-Range"); cr != "bytes */"+strconv.Itoa(len(content)) {
					t.Fatalf("416 Content-Range %q", cr)
				}
				if _, perr := ParseRange(rangeH, int64(len(content))); perr == nil {
					t.Fatalf("416 for a range ParseRange accepts: %q", rangeH)
				}
			default:
				t.Fatalf("%s %q range %q: unexpected error %v", method, path, rangeH, err)
			}
			return
		}
		if !known {
			// Files of the release outside the fixed list (manifest,
			// signatures) may be served; nothing more to check here.
			return
		}
		etag := etagOf(path)
		res := w.Result()
		body := w.Body.Bytes()
		if res.Header.Get("ETag") != etag {
			t.Fatalf("ETag %q, want %q", res.Header.Get("ETag"), etag)
		}
		inmHit := inm != "" && etagListMatches(inm, etag)
		rangeUsed := rangeH != "" && ifRangeAllows(ifRange, etag)
		switch res.StatusCode {
		case http.StatusNotModified:
			if !inmHit || len(body) != 0 {
				t.Fatalf("304 for If-None-Match %q with %d body bytes", inm, len(body))
			}
		case http.StatusOK:
			if inmHit {
				t.Fatalf("200 despite matching If-None-Match %q", inm)
			}
			if rangeUsed {
				if rs, _ := ParseRange(rangeH, int64(len(content))); len(rs) == 1 {
					t.Fatalf("200 for the single range %q", rangeH)
				}
			}
			if res.Header.Get("Content-Length") != strconv.Itoa(len(content)) {
				t.Fatalf("200 Content-Length %q of %d", res.Header.Get("Content-Length"), len(content))
			}
			if !head && !bytes.Equal(body, content) {
				t.Fatalf("200 body differs (%d bytes of %d)", len(body), len(content))
			}
		case http.StatusPartialContent:
			rs, perr := ParseRange(rangeH, int64(len(content)))
			if inmHit || !rangeUsed || perr != nil || len(rs) != 1 {
				t.Fatalf("206 for Range %q If-Range %q (%v, %d ranges)", rangeH, ifRange, perr, len(rs))
			}
			want := content[rs[0].Start : rs[0].Start+rs[0].Length]
			if cr := res.Header.Get("Content-Range"); cr != rs[0].ContentRange(int64(len(content))) {
				t.Fatalf("206 Content-Range %q for %+v", cr, rs[0])
			}
			if res.Header.Get("Content-Length") != strconv.Itoa(len(want)) {
				t.Fatalf("206 Content-Length %q, want %d", res.Header.Get("Content-Length"), len(want))
			}
			if !head && !bytes.Equal(body, want) {
				t.Fatalf("206 body differs from bytes %+v", rs[0])
			}
		default:
			t.Fatalf("status %d", res.StatusCode)
		}
	})
}
