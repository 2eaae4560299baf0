// Package crash kills a real founder (`stratum serve`, a child process)
// with SIGKILL at random moments while a stream of writes is in flight,
// and checks after every restart that each acknowledged write is there,
// that nothing unacknowledged is half-applied, that the audit chain
// verifies and that waiting joiners resume. TestDiskFull runs the founder
// on a small tmpfs until it is full.
//
// The binary is built once, statically (CGO_ENABLED=0), as the e2e tests
// do. CRASH_KILLS sets the number of kills (default 8; the full run uses
// 60), CRASH_SEED the random seed, CRASH_RELEASE_MB the size of the
// release blob (default 64).
package crash

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

func TestMain(m *testing.M) { os.Exit(stratumtest.Main(m)) }

// bin is the stratum binary, built once by stratumtest.Main.
func bin() string {
	p, _ := stratumtest.Build()
	return p
}

// cleanEnv is the environment without STRATUM_* twins that would steer flags.
func cleanEnv() []string { return stratumtest.Env() }

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// stratum runs the binary to completion.
func stratum(t testing.TB, args ...string) result {
	t.Helper()
	r := stratumtest.Run(t, nil, args...)
	return result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr, took: r.Took}
}

func mustStratum(t testing.TB, args ...string) string {
	t.Helper()
	r := stratum(t, args...)
	if r.code != 0 {
		t.Fatalf("stratum %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// proc is one running `stratum serve`.
type proc = stratumtest.Founder

// startServe runs `stratum serve --data dir` on fixed addresses and waits
// for the banner. A port taken by someone else while the founder was down
// is reported as stratumtest.ErrAddrInUse so the caller can pick others.
func startServe(dir, apiAddr, joinAddr string, extra ...string) (*proc, error) {
	return stratumtest.Spawn(stratumtest.FounderOptions{Dir: dir, APIAddr: apiAddr, JoinAddr: joinAddr, Args: extra, StartTimeout: 90 * time.Second})
}

// freeAddrs picks two free ports on 127.0.0.1 (reserving nothing: each
// is asked of the kernel and closed), for a founder that must come back
// on the same addresses.
func freeAddrs(t testing.TB) (api, join string) {
	t.Helper()
	var addrs [2]string
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close() // both open at once: two different ports
		addrs[i] = ln.Addr().String()
	}
	return addrs[0], addrs[1]
}

// writeConfig writes dir/cluster.yaml: a cluster on release 0.2.0.
func writeConfig(t testing.TB, dir string) string {
	t.Helper()
	cfg := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(cfg, []byte("parentDomain: crash.example.com\nregion: lab-1\nclusterRelease: 0.2.0\ndnsUpstreamServers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func httpClient(pool *x509.CertPool, certs []tls.Certificate, keepAlive bool) *http.Client {
	return &http.Client{Timeout: 45 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: certs},
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 16,
	}}
}

// envelope is the error body (SPEC section 2).
type envelope struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// call sends one JSON request; status 0 with err means no answer.
func call(ctx context.Context, c *http.Client, method, url, bearer string, body any, hdr map[string]string) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		// A body cut short is no answer: the write is not acknowledged.
		return 0, nil, nil, err
	}
	return resp.StatusCode, raw, resp.Header, nil
}

// unixClient talks HTTP over the founder's control socket.
func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "unix", sock)
	}}}
}

// releaseTree is a signed release tree on disk: one random blob and a
// small sysext file.
type releaseTree struct {
	dir         string
	release     string
	blobPath    string // relative to dir
	blob        []byte
	manifestSum string // hex SHA-256 of payload/manifest.json
}

// makeReleaseTree writes and signs a release tree with keyFile.
func makeReleaseTree(t testing.TB, dir, release, upgradesFrom, keyFile string, size int) *releaseTree {
	t.Helper()
	blob := make([]byte, size)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(blob)
	rel := filepath.Join("os", "blobs", "sha256", hex.EncodeToString(sum[:]))
	for _, d := range []string{filepath.Dir(filepath.Join(dir, rel)), filepath.Join(dir, "sysext")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, rel), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sysext", "stratum-ovs.raw"), []byte("sysext "+dir), 0o644); err != nil {
		t.Fatal(err)
	}
	mustStratum(t, "release", "sign", "--key", keyFile, "--release", release, "--upgrades-from", upgradesFrom, dir)
	mb, err := os.ReadFile(filepath.Join(dir, "payload", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	ms := sha256.Sum256(mb)
	return &releaseTree{dir: dir, release: release, blobPath: filepath.ToSlash(rel), blob: blob, manifestSum: hex.EncodeToString(ms[:])}
}

// treeOnDisk describes an imported tree under DIR/releases/<release>:
// the SHA-256 of its manifest and the problems found with its files.
func treeOnDisk(dir string) (manifestSum string, problems []string) {
	mb, err := os.ReadFile(filepath.Join(dir, "payload", "manifest.json"))
	if err != nil {
		return "", []string{"payload/manifest.json: " + err.Error()}
	}
	s := sha256.Sum256(mb)
	var m struct {
		Files []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
		} `json:"files"`
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return hex.EncodeToString(s[:]), []string{"manifest does not decode: " + err.Error()}
	}
	if _, err := os.Stat(filepath.Join(dir, "payload", "manifest.sig")); err != nil {
		problems = append(problems, "payload/manifest.sig: "+err.Error())
	}
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		switch {
		case err != nil:
			problems = append(problems, f.Path+": "+err.Error())
		case st.Size() != f.Size:
			problems = append(problems, fmt.Sprintf("%s: %d bytes, manifest says %d", f.Path, st.Size(), f.Size))
		}
	}
	return hex.EncodeToString(s[:]), problems
}

// writableTempDir is t.TempDir whose contents are made writable again
// before removal: imported release trees are read-only.
func writableTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	return dir
}
