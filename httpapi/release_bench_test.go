package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
