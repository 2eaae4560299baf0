package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/release"
	"stratum/release/releasetest"
	"stratum/release/repo"
	"stratum/store"
	"stratum/store/storetest"
)

// releaseHandler serves GET /r/<release>/<path> the way the join
// listener does, minus the joiner checks; holder is the reading
// registration, "reg" unless the X-Holder header names another.
func releaseHandler(m *repo.Service) http.Handler {
	log := slog.New(slog.DiscardHandler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, _ := strings.CutPrefix(r.URL.Path, "/r/")
		rel, p, _ := strings.Cut(rest, "/")
		holder := cmp.Or(r.Header.Get("X-Holder"), "reg")
		if err := ServeReleaseFile(w, r, m, holder, rel, p); err != nil {
			writeError(w, r, log, err)
		}
	})
}

type fixture struct {
	db      *store.DB
	dataDir string
	src     string
	keys    *release.Keyring
	mirror  *repo.Service
	ts      *httptest.Server
	client  *http.Client
	blob    string // manifest path of the big file
	data    []byte // its bytes
	etag    string
}

// newFixture imports a release whose blob has blobSize bytes and serves
// it over real TLS. Its cleanup checks that no goroutine outlives it.
func newFixture(t *testing.T, blobSize, concurrency int) *fixture {
	t.Helper()
	return newFixtureWith(t, blobSize, false, repo.Config{Concurrency: concurrency})
}

func newFixtureWith(t testing.TB, blobSize int, http2 bool, cfg repo.Config) *fixture {
	t.Helper()
	baseline := runtime.NumGoroutine()
	t.Cleanup(func() { releasetest.WaitGoroutines(t, baseline) })
	f := &fixture{}
	var pub string
	f.src, f.blob, pub = releasetest.SignedTree(t, blobSize, "0.6.0")
	f.keys = releasetest.Keyring(t, 1, pub)
	f.db, f.dataDir = storetest.Temp(t)
	var err error
	cfg.DB, cfg.DataDir, cfg.Keys, cfg.Log = f.db, f.dataDir, f.keys, slog.New(slog.NewTextHandler(t.Output(), nil))
	if f.mirror, err = repo.New(cfg); err != nil {
		t.Fatal(err)
	}
	f.reimport(t)
	if f.data, err = os.ReadFile(filepath.Join(f.src, f.blob)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(f.data)
	f.etag = `"sha256:` + hex.EncodeToString(sum[:]) + `"`
	f.ts = httptest.NewUnstartedServer(releaseHandler(f.mirror))
	f.ts.EnableHTTP2 = http2
	f.ts.StartTLS()
	f.client = f.ts.Client()
	t.Cleanup(func() {
		f.client.CloseIdleConnections()
		f.ts.Close()
	})
	return f
}

// reimport imports the fixture's tree (again).
func (f *fixture) reimport(t testing.TB) {
	t.Helper()
	if _, err := f.mirror.Import(context.Background(), f.src, repo.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
}

// onDisk is the imported copy of the blob.
func (f *fixture) onDisk() string {
	return filepath.Join(f.dataDir, "releases", "0.6.0", filepath.FromSlash(f.blob))
}

func (f *fixture) url(path string) string { return f.ts.URL + "/r/0.6.0/" + path }

// do sends a request with headers and returns the response with its body
// read (bodyErr: how reading ended).
func (f *fixture) do(t *testing.T, method, url string, headers ...string) (resp *http.Response, body []byte, bodyErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err = f.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, bodyErr = io.ReadAll(resp.Body)
	return resp, body, bodyErr
}

func errorCode(t *testing.T, body []byte) apierr.Code {
	t.Helper()
	var e apierr.Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Code
}

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestServeResume: a download cut half-way resumes with Range + If-Range
// and the joined bytes hash right; a changed ETag restarts from zero.
func TestServeResume(t *testing.T) {
	f := newFixture(t, 8*repo.ChunkSize+1234, 4)
	size := len(f.data)

	// First attempt: cut after 3.5 MiB and some.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url(f.blob), nil)
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != f.etag || resp.ContentLength != int64(size) ||
		resp.Header.Get("Accept-Ranges") != "bytes" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("first response %d %v", resp.StatusCode, resp.Header)
	}
	part := make([]byte, 3*repo.ChunkSize+repo.ChunkSize/2+77)
	if _, err := io.ReadFull(resp.Body, part); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // interrupted

	resp2, rest, err := f.do(t, http.MethodGet, f.url(f.blob), "Range", "bytes="+strconv.Itoa(len(part))+"-", "If-Range", resp.Header.Get("ETag"))
	if err != nil {
		t.Fatal(err)
	}
	wantCR := "bytes " + strconv.Itoa(len(part)) + "-" + strconv.Itoa(size-1) + "/" + strconv.Itoa(size)
	if resp2.StatusCode != 206 || resp2.Header.Get("Content-Range") != wantCR || resp2.ContentLength != int64(size-len(part)) {
		t.Fatalf("resume: %d %v", resp2.StatusCode, resp2.Header)
	}
	if got := hashOf(append(part, rest...)); `"sha256:`+got+`"` != f.etag {
		t.Fatal("resumed download hashes wrong")
	}

	// If-Range with another ETag, or a date: the whole file, 200.
	for _, ifRange := range []string{`"sha256:00"`, "Wed, 21 Oct 2015 07:28:00 GMT"} {
		resp3, whole, err := f.do(t, http.MethodGet, f.url(f.blob), "Range", "bytes=100-", "If-Range", ifRange)
		if err != nil || resp3.StatusCode != 200 || !bytes.Equal(whole, f.data) {
			t.Fatalf("If-Range %q: %d, %d bytes, %v", ifRange, resp3.StatusCode, len(whole), err)
		}
	}
	if f.mirror.InFlight() != 0 {
		t.Fatalf("%d slots still taken", f.mirror.InFlight())
	}
}

func TestServeRanges(t *testing.T) {
	f := newFixture(t, 2*repo.ChunkSize+10, 4)
	size := len(f.data)
	sz := strconv.Itoa(size)
	cases := []struct {
		name     string
		method   string
		headers  []string
		status   int
		body     []byte
		cr       string
		code     apierr.Code
		noLength bool
	}{
		{"whole", "GET", nil, 200, f.data, "", "", false},
		{"suffix", "GET", []string{"Range", "bytes=-10"}, 206, f.data[size-10:], "bytes " + strconv.Itoa(size-10) + "-" + strconv.Itoa(size-1) + "/" + sz, "", false},
		{"first byte", "GET", []string{"Range", "bytes=0-0"}, 206, f.data[:1], "bytes 0-0/" + sz, "", false},
		{"across chunks", "GET", []string{"Range", "bytes=1048570-2097160"}, 206, f.data[1048570:2097161], "bytes 1048570-2097160/" + sz, "", false},
		{"open end", "GET", []string{"Range", "bytes=" + strconv.Itoa(2*repo.ChunkSize) + "-"}, 206, f.data[2*repo.ChunkSize:], "bytes 2097152-" + strconv.Itoa(size-1) + "/" + sz, "", false},
		{"unsatisfiable", "GET", []string{"Range", "bytes=" + sz + "-"}, 416, nil, "bytes */" + sz, apierr.RangeNotSatisfiable, false},
		{"malformed", "GET", []string{"Range", "bytes=9-1"}, 416, nil, "bytes */" + sz, apierr.RangeNotSatisfiable, false},
		{"multi", "GET", []string{"Range", "bytes=0-1,5-6"}, 200, f.data, "", "", false},
		{"10000 ranges", "GET", []string{"Range", "bytes=" + strings.Repeat("0-0,", 10000)}, 200, f.data, "", "", false},
		{"other unit", "GET", []string{"Range", "items=0-1"}, 200, f.data, "", "", false},
		{"if-none-match", "GET", []string{"If-None-Match", f.etag}, 304, nil, "", "", true},
		{"if-none-match weak list", "GET", []string{"If-None-Match", `"x", W/` + f.etag}, 304, nil, "", "", true},
		{"if-none-match other", "GET", []string{"If-None-Match", `"sha256:00"`}, 200, f.data, "", "", false},
		{"head", "HEAD", nil, 200, nil, "", "", false},
		{"head range", "HEAD", []string{"Range", "bytes=-10"}, 206, nil, "bytes " + strconv.Itoa(size-10) + "-" + strconv.Itoa(size-1) + "/" + sz, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body, err := f.do(t, c.method, f.url(f.blob), c.headers...)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, c.status, body)
			}
			if got := resp.Header.Get("Content-Range"); got != c.cr {
				t.Fatalf("Content-Range %q, want %q", got, c.cr)
			}
			if c.code != "" {
				if got := errorCode(t, body); got != c.code {
					t.Fatalf("code %s, want %s", got, c.code)
				}
				return
			}
			if resp.StatusCode == 304 {
				if resp.Header.Get("ETag") != f.etag || len(body) != 0 {
					t.Fatalf("304: %v %d bytes", resp.Header, len(body))
				}
				return
			}
			if resp.Header.Get("ETag") != f.etag || resp.Header.Get("Accept-Ranges") != "bytes" {
				t.Fatalf("headers %v", resp.Header)
			}
			wantLen := int64(len(c.body))
			if c.method == "HEAD" {
				if len(body) != 0 {
					t.Fatal("HEAD with a body")
				}
				wantLen = int64(size)
				if c.status == 206 {
					wantLen = 10
				}
			} else if !bytes.Equal(body, c.body) {
				t.Fatalf("body of %d bytes differs from the %d expected", len(body), len(c.body))
			}
			if resp.ContentLength != wantLen {
				t.Fatalf("Content-Length %d, want %d", resp.ContentLength, wantLen)
			}
		})
	}

	// The payload files are served too, and the empty file.
	resp, body, _ := f.do(t, "GET", f.url(release.ManifestPath))
	if resp.StatusCode != 200 {
		t.Fatalf("manifest: %d", resp.StatusCode)
	}
	if _, err := release.ParseManifest(body); err != nil {
		t.Fatal(err)
	}
	if resp, body, _ := f.do(t, "GET", f.url("os/empty")); resp.StatusCode != 200 || len(body) != 0 || resp.ContentLength != 0 {
		t.Fatalf("empty file: %d %d", resp.StatusCode, len(body))
	}
	if resp, _, _ := f.do(t, "GET", f.url("os/empty"), "Range", "bytes=0-"); resp.StatusCode != 416 {
		t.Fatalf("range of an empty file: %d", resp.StatusCode)
	}
}

// TestServeNotFound: anything not in the index is 404, decided without
// the disk, whatever is planted there.
func TestServeNotFound(t *testing.T) {
	f := newFixture(t, 1000, 4)
	relDir := filepath.Join(f.dataDir, "releases", "0.6.0")
	os.Chmod(filepath.Join(relDir, "os"), 0o755)
	os.WriteFile(filepath.Join(relDir, "os", "planted"), []byte("PLANTED-CONTENT"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(relDir, "os", "passwd"))
	for _, p := range []string{
		"/r/0.6.0/os/nothing",
		"/r/0.6.0/os/planted",
		"/r/0.6.0/os/passwd",
		"/r/0.6.0/../../../etc/passwd",
		"/r/0.6.0/os/../os/index.json",
		"/r/0.6.0/%2e%2e/%2e%2e/etc/passwd",
		"/r/0.6.0/os/%2e%2e/os/index.json",
		"/r/0.6.0//etc/passwd",
		"/r/0.6.0/os//index.json",
		"/r/0.6.0/./os/index.json",
		"/r/0.6.0/os%5cindex.json",
		"/r/0.6.0/os/index.json%00",
		"/r/0.6.0/os",
		"/r/0.6.0/",
		"/r/9.9.9/os/index.json",
		"/r/../os/index.json",
		"/r/0.6.0/payload/other",
	} {
		resp, body, _ := f.do(t, "GET", f.ts.URL+p)
		if resp.StatusCode != 404 || errorCode(t, body) != apierr.NotFound {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
		if bytes.Contains(body, []byte("root:")) || bytes.Contains(body, []byte("PLANTED-CONTENT")) {
			t.Errorf("GET %s leaked file content", p)
		}
	}
	if resp, _, _ := f.do(t, "GET", f.url("os/index.json")); resp.StatusCode != 200 {
		t.Fatalf("listed file: %d", resp.StatusCode)
	}
	rec := httptest.NewRecorder()
	err := ServeReleaseFile(rec, httptest.NewRequest("POST", "/", nil), f.mirror, "reg", "0.6.0", "os/index.json")
	if apierr.CodeOf(err) != apierr.MethodNotAllowed {
		t.Fatalf("POST: %v", err)
	}
}

// TestServeSymlinkRefused: a listed file or directory replaced by a link
// out of the tree is never followed: the file is refused as corrupt.
func TestServeSymlinkRefused(t *testing.T) {
	f := newFixture(t, 1000, 4)
	relDir := filepath.Join(f.dataDir, "releases", "0.6.0")
	os.Chmod(filepath.Join(relDir, "os"), 0o755)
	os.Remove(filepath.Join(relDir, "os", "index.json"))
	os.Symlink("/etc/passwd", filepath.Join(relDir, "os", "index.json"))

	outside := t.TempDir()
	raw := "stratum-ovs_3.5.3-5.el10s.raw"
	os.WriteFile(filepath.Join(outside, raw), []byte("outside"), 0o644)
	os.Chmod(relDir, 0o755)
	os.Rename(filepath.Join(relDir, "sysext"), filepath.Join(t.TempDir(), "sysext"))
	os.Symlink(outside, filepath.Join(relDir, "sysext"))

	for _, p := range []string{"os/index.json", "sysext/" + raw} {
		resp, body, _ := f.do(t, "GET", f.url(p))
		if resp.StatusCode != 503 || errorCode(t, body) != apierr.ReleaseCorrupt {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
		if bytes.Contains(body, []byte("root:")) || bytes.Contains(body, []byte("outside")) {
			t.Errorf("GET %s followed the link", p)
		}
	}
	if f.mirror.CorruptCount() != 2 {
		t.Fatalf("corrupt count %d", f.mirror.CorruptCount())
	}
}

// TestServeBusy: 8 slow readers (8 registrations) against 4 slots: exactly 4 are served,
// 4 are told RELEASE_BUSY at once with Retry-After in 1..5, none hangs.
func TestServeBusy(t *testing.T) {
	f := newFixture(t, 16*repo.ChunkSize, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A reader that does not read then really holds its slot.
	f.client.Transport.(*http.Transport).DialContext = releasetest.StallingDialer()

	type outcome struct {
		resp    *http.Response
		elapsed time.Duration
		err     error
		holder  string
	}
	results := make(chan outcome, 8)
	for i := range 8 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url(f.blob), nil)
			req.Header.Set("X-Holder", "reg-"+strconv.Itoa(i)) // one read each: the founder's limit is tried
			start := time.Now()
			resp, err := f.client.Do(req)
			results <- outcome{resp, time.Since(start), err, "reg-" + strconv.Itoa(i)}
		}()
	}
	var served []*http.Response
	busy := 0
	var waiting string
	for range 8 {
		var o outcome
		select {
		case o = <-results:
		case <-ctx.Done():
			t.Fatal("a request hung")
		}
		if o.err != nil {
			t.Fatal(o.err)
		}
		switch o.resp.StatusCode {
		case 200:
			served = append(served, o.resp) // not read yet: it holds its slot
		case 503:
			body, _ := io.ReadAll(o.resp.Body)
			o.resp.Body.Close()
			if errorCode(t, body) != apierr.ReleaseBusy {
				t.Fatalf("503 %s", body)
			}
			ra, err := strconv.Atoi(o.resp.Header.Get("Retry-After"))
			if err != nil || ra < 1 || ra > 5 {
				t.Fatalf("Retry-After %q", o.resp.Header.Get("Retry-After"))
			}
			if o.elapsed > 5*time.Second {
				t.Fatalf("busy answer took %s: it must not wait for a slot", o.elapsed)
			}
			busy++
			waiting = o.holder
		default:
			t.Fatalf("status %d", o.resp.StatusCode)
		}
	}
	if len(served) != 4 || busy != 4 || f.mirror.BusyCount() != 4 {
		t.Fatalf("served %d, busy %d (count %d)", len(served), busy, f.mirror.BusyCount())
	}
	if f.mirror.InFlight() != 4 {
		t.Fatalf("%d slots taken while 4 readers stall", f.mirror.InFlight())
	}
	var wg sync.WaitGroup
	for _, resp := range served {
		wg.Go(func() {
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(body, f.data) {
				t.Errorf("slow reader got %d bytes, %v", len(body), err)
			}
		})
	}
	wg.Wait()
	// The slots come back once the readers' answers end (a loaded
	// machine may take a while to drain 4 x 16 MiB through the stalling
	// dialer): wait for that before asking again.
	for deadline := time.Now().Add(20 * time.Second); f.mirror.InFlight() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots still taken after every reader finished", f.mirror.InFlight())
		}
	}
	// The refused registrations wait in line for the freed slots (SPEC
	// 16.9): one of them coming back is served.
	if resp, _, _ := f.do(t, "GET", f.url("os/index.json"), "X-Holder", waiting); resp.StatusCode != 200 {
		t.Fatalf("a waiting registration after the readers: %d", resp.StatusCode)
	}
}

// TestServeCorrupt: a byte flipped on disk after import. The client gets
// exactly the bytes before the bad 64 KiB sub-chunk, never a wrong one;
// the file is marked corrupt, audited and counted; later requests get
// RELEASE_CORRUPT until a re-import. (No cache here: a cached unit is
// served as verified, whatever the disk holds since; TestServeCache.)
func TestServeCorrupt(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run("http2="+strconv.FormatBool(h2), func(t *testing.T) { testServeCorrupt(t, h2) })
	}
}

func testServeCorrupt(t *testing.T, http2 bool) {
	f := newFixtureWith(t, 8*repo.ChunkSize, http2, repo.Config{Concurrency: 4, CacheBytes: -1})
	onDisk := f.onDisk()
	const bad = 3*repo.ChunkSize + 5*repo.SubChunkSize
	releasetest.FlipByte(t, onDisk, bad+100)

	resp, body, err := f.do(t, "GET", f.url(f.blob))
	if resp.StatusCode != 200 || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[http2] {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Proto)
	}
	if err == nil {
		t.Fatal("the cut response read as complete")
	}
	if len(body) != bad || !bytes.Equal(body, f.data[:len(body)]) {
		t.Fatalf("client got %d bytes (want the %d before the bad sub-chunk), equal prefix: %v",
			len(body), bad, bytes.Equal(body, f.data[:min(len(body), len(f.data))]))
	}

	for _, headers := range [][]string{nil, {"Range", "bytes=0-10"}} {
		resp, body, _ = f.do(t, "GET", f.url(f.blob), headers...)
		if resp.StatusCode != 503 || errorCode(t, body) != apierr.ReleaseCorrupt {
			t.Fatalf("after corruption: %d %s", resp.StatusCode, body)
		}
	}
	if resp, _, _ := f.do(t, "GET", f.url("os/index.json")); resp.StatusCode != 200 {
		t.Fatalf("another file of the release: %d", resp.StatusCode)
	}
	if f.mirror.CorruptCount() != 1 || f.mirror.Offered("0.6.0") {
		t.Fatalf("count %d, offered %v", f.mirror.CorruptCount(), f.mirror.Offered("0.6.0"))
	}
	r, _ := f.mirror.Get("0.6.0")
	if len(r.Corrupt) != 1 || r.Corrupt[0] != f.blob {
		t.Fatalf("corrupt files %v", r.Corrupt)
	}
	if kinds := strings.Join(storetest.AuditKinds(t, f.db), ","); kinds != "release.imported:0.6.0,release.corrupt:0.6.0" {
		t.Fatalf("audit %s", kinds)
	}

	// A bad first chunk: nothing was written, so the error is clean.
	releasetest.FlipByte(t, onDisk, bad+100) // repair, then re-import to clear
	f.reimport(t)
	if resp, body, err := f.do(t, "GET", f.url(f.blob)); resp.StatusCode != 200 || err != nil || !bytes.Equal(body, f.data) {
		t.Fatalf("after re-import: %d %v", resp.StatusCode, err)
	}
	releasetest.FlipByte(t, onDisk, 7)
	resp, body, _ = f.do(t, "GET", f.url(f.blob), "Range", "bytes=5-9")
	if resp.StatusCode != 503 || errorCode(t, body) != apierr.ReleaseCorrupt {
		t.Fatalf("bad first chunk: %d %s", resp.StatusCode, body)
	}
	if f.mirror.CorruptCount() != 2 {
		t.Fatalf("count %d", f.mirror.CorruptCount())
	}
}

// TestServeClose: Close cuts a response in flight and refuses new ones.
func TestServeClose(t *testing.T) {
	f := newFixture(t, 32*repo.ChunkSize, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url(f.blob), nil)
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	f.mirror.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil || len(body) >= len(f.data) || !bytes.Equal(body, f.data[:len(body)]) {
		t.Fatalf("after Close: %d bytes, %v", len(body), err)
	}
	resp2, body2, _ := f.do(t, "GET", f.url(f.blob))
	if resp2.StatusCode != 503 || errorCode(t, body2) != apierr.Unavailable {
		t.Fatalf("new request after Close: %d", resp2.StatusCode)
	}
	if f.mirror.CorruptCount() != 0 {
		t.Fatal("a cut response marked the file corrupt")
	}
}

// TestServeDuringReimport: a response in flight when the release is
// re-imported finishes from the file it opened, with the index it read;
// nothing is marked corrupt, and a mismatch seen against an index that
// has since been replaced is not blamed on the new import.
func TestServeDuringReimport(t *testing.T) {
	f := newFixture(t, 16*repo.ChunkSize, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url(f.blob), nil)
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, repo.ChunkSize)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	f.reimport(t)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(append(head, rest...), f.data) {
		t.Fatalf("download across a re-import: %d bytes, %v", len(head)+len(rest), err)
	}
	if f.mirror.CorruptCount() != 0 || !f.mirror.Offered("0.6.0") {
		t.Fatal("re-import while serving marked the release corrupt")
	}
}

// BenchmarkServeRange64K: 64 KiB ranged GETs over TLS with keep-alive,
// as mirror-range64k-* makes them, with and without the chunk cache.
// Compare the server's CPU per request from -cpuprofile
// (-focus 'ServeReleaseFile|conn..serve').
func BenchmarkServeRange64K(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int64
	}{{"nocache", -1}, {"cache", 0}} {
		b.Run(c.name, func(b *testing.B) {
			f := newFixtureWith(b, 8<<20, false, repo.Config{Concurrency: 64, CacheBytes: c.cache})
			b.SetBytes(64 << 10)
			i := 0
			for b.Loop() {
				off := (i % 100) << 16
				i++
				req, _ := http.NewRequest("GET", f.url(f.blob), nil)
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+64<<10-1))
				resp, err := f.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != 64<<10 || resp.StatusCode != 206 {
					b.Fatalf("%d: %d bytes, %v", resp.StatusCode, n, err)
				}
			}
		})
	}
}
