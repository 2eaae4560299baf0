package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"stratum/release/releasetest"
	"stratum/release/repo"
	"stratum/store/storetest"
)

// BenchmarkServe measures one client downloading the 64 MiB blob over
// TLS, through ServeFile (per-chunk verification) and, for the ratio,
// through http.ServeContent on the same file with no verification.
func BenchmarkServe(b *testing.B) {
	src, blob, pub := releasetest.SignedTree(b, 64<<20, "0.6.0")
	keys := releasetest.Keyring(b, 1, pub)
	db, dataDir := storetest.Temp(b)
	m, err := repo.New(repo.Config{DB: db, DataDir: dataDir, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Import(context.Background(), src, repo.ImportOptions{}); err != nil {
		b.Fatal(err)
	}
	onDisk := filepath.Join(dataDir, "releases", "0.6.0", filepath.FromSlash(blob))
	handlers := map[string]http.Handler{
		"ServeFile": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := ServeReleaseFile(w, r, m, "bench", "0.6.0", blob); err != nil {
				http.Error(w, err.Error(), 500)
			}
		}),
		"ServeContent": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, err := os.Open(onDisk)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			defer f.Close()
			http.ServeContent(w, r, "", fixedTime, f)
		}),
	}
	for _, name := range []string{"ServeFile", "ServeContent"} {
		b.Run(name, func(b *testing.B) {
			ts := httptest.NewTLSServer(handlers[name])
			defer ts.Close()
			client := ts.Client()
			defer client.CloseIdleConnections()
			b.SetBytes(64 << 20)
			for b.Loop() {
				req, _ := http.NewRequestWithContext(context.Background(), "GET", ts.URL, nil)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != 64<<20 {
					b.Fatal(n, err)
				}
			}
		})
	}
}

var fixedTime time.Time

// BenchmarkServeRange64k measures one client reading 64 KiB ranges at
// unaligned offsets of the 64 MiB blob over TLS (keep-alive), the
// mirror benchmark's range64k case in one process: its allocs/op is the
// handler's per-request garbage plus the client's. nocache reads and
// hashes every unit; cache reads the blob once first, then sends every
// range from the cache of verified units.
func BenchmarkServeRange64k(b *testing.B) {
	src, blob, pub := releasetest.SignedTree(b, 64<<20, "0.6.0")
	keys := releasetest.Keyring(b, 1, pub)
	for _, c := range []struct {
		name  string
		cache int64
	}{{"nocache", -1}, {"cache", 128 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			db, dataDir := storetest.Temp(b)
			m, err := repo.New(repo.Config{DB: db, DataDir: dataDir, Keys: keys, CacheBytes: c.cache})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Import(context.Background(), src, repo.ImportOptions{}); err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := ServeReleaseFile(w, r, m, "bench", "0.6.0", blob); err != nil {
					http.Error(w, err.Error(), 500)
				}
			}))
			defer ts.Close()
			client := ts.Client()
			defer client.CloseIdleConnections()
			get := func(rangeHeader string) int64 {
				req, _ := http.NewRequestWithContext(context.Background(), "GET", ts.URL, nil)
				if rangeHeader != "" {
					req.Header.Set("Range", rangeHeader)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode/100 != 2 {
					b.Fatal(n, err, resp.StatusCode)
				}
				return n
			}
			if c.cache > 0 {
				get("") // the whole blob: every unit in the cache
			}
			b.SetBytes(64 << 10)
			b.ReportAllocs()
			off := int64(12345)
			for b.Loop() {
				if n := get("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+64<<10-1, 10)); n != 64<<10 {
					b.Fatal(n)
				}
				off = (off + 7777777) % (64<<20 - 64<<10)
			}
			if c.cache > 0 && m.CacheMisses() != 64<<20/repo.SubChunkSize {
				b.Fatalf("%d units read from disk, want each once", m.CacheMisses())
			}
		})
	}
}
