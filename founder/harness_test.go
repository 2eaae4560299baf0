package founder

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"

	"stratum/apierr"
	"stratum/buildinfo"
	"stratum/cluster"
)

// testFounder is a founder served in-process on loopback ports.
type testFounder struct {
	t        *testing.T
	dir      DataDir
	api      string
	join     string
	caPool   *x509.CertPool
	token    string
	stop     context.CancelFunc
	done     chan error
	adminCli *http.Client
	stopped  bool
}

func startFounder(t *testing.T, cfg *cluster.Config, mutate func(*Options)) *testFounder {
	t.Helper()
	dir := DataDir(t.TempDir())
	if cfg != nil {
		if _, err := Init(dir, *cfg, true, time.Now()); err != nil {
			t.Fatalf("init: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	o := Options{
		Data: dir, Dev: true, APIAddr: "127.0.0.1:0", JoinAddr: "127.0.0.1:0",
		Build: buildinfo.Info{Version: "test", Commit: "abcdef12"},
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)), Out: io.Discard,
		Ready: func(a, j string) { ready <- [2]string{a, j} },
	}
	if mutate != nil {
		mutate(&o)
	}
	f := &testFounder{t: t, dir: dir, stop: cancel, done: make(chan error, 1)}
	go func() { f.done <- Serve(ctx, o) }()
	select {
	case addrs := <-ready:
		f.api, f.join = "https://"+addrs[0], "https://"+addrs[1]
	case err := <-f.done:
		t.Fatalf("founder did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("founder did not start in time")
	}
	t.Cleanup(f.shutdown)
	pem, err := os.ReadFile(dir.CACert())
	if err != nil {
		t.Fatal(err)
	}
	f.caPool = x509.NewCertPool()
	f.caPool.AppendCertsFromPEM(pem)
	f.adminCli = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.caPool}}}
	f.token = f.login()
	return f
}

func (f *testFounder) shutdown() {
	if f.stopped {
		return
	}
	f.stopped = true
	f.stop()
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Errorf("founder exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		f.t.Error("founder did not shut down")
	}
}

// credentials reads the bootstrap admin's email and password.
func (f *testFounder) credentials() (email, password string) {
	b, err := os.ReadFile(f.dir.Credentials())
	if err != nil {
		f.t.Fatal(err)
	}
	creds := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		creds[k] = v
	}
	return creds["email"], creds["password"]
}

func (f *testFounder) login() string {
	email, password := f.credentials()
	var out struct{ Token string }
	f.admin("POST", "/v1/auth/login", map[string]string{"email": email, "password": password}, 200, &out)
	return out.Token
}

// admin calls the admin API with the bootstrap admin's token and checks
// the status.
func (f *testFounder) admin(method, path string, body any, want int, out any) *apierr.Error {
	f.t.Helper()
	return call(f.t, f.adminCli, method, f.api+path, f.token, body, want, out)
}

func call(t *testing.T, c *http.Client, method, url, token string, body any, want int, out any) *apierr.Error {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, resp.StatusCode, want, raw)
	}
	if resp.StatusCode >= 400 {
		var e apierr.Error
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s %s: error body is not the envelope: %s", method, url, raw)
		}
		return &e
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode: %v: %s", method, url, err, raw)
		}
	}
	return nil
}

// joinerKey is a joiner identity: an ed25519 key and a self-signed
// certificate, as `stratum join` presents.
type joinerKey struct {
	client *http.Client
	base   string
}

func (f *testFounder) newJoiner() *joinerKey {
	f.t.Helper()
	cert := stratumtest.NewJoinerKey(f.t).Cert
	return &joinerKey{base: f.join, client: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.caPool, Certificates: []tls.Certificate{cert}},
	}}}
}

func (j *joinerKey) do(t *testing.T, method, path string, body any, want int, out any) *apierr.Error {
	t.Helper()
	return call(t, j.client, method, j.base+path, "", body, want, out)
}
