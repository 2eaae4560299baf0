package joinflow

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"stratum/crypto"
)

// fakeFounder is an impostor that holds a real founder certificate of its
// own cluster (so the pin and the founder SAN check pass) and answers
// every registration with needs-upgrade and the offer it is given. It
// serves the release files of tree, when given.
type fakeFounder struct {
	addr, pin string
	mu        sync.Mutex
	paths     []string
}

func startFakeFounder(t *testing.T, offer map[string]string, tree string) *fakeFounder {
	t.Helper()
	ca, err := crypto.NewCA("cl-impostr1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost"}, URIs: []*url.URL{crypto.FounderURI("cl-impostr1")}, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(append(leaf.CertPEM, ca.CertPEM()...), leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ff := &fakeFounder{pin: ca.Pin()}
	view := map[string]any{"joinId": "j-fake0001", "state": "needs-upgrade", "role": "worker", "release": offer["from"], "upgrade": map[string]string{"from": offer["from"], "to": offer["to"], "source": ""}}
	const releasePrefix = "/v1/join/registrations/j-fake0001/release/"
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ff.mu.Lock()
		ff.paths = append(ff.paths, r.Method+" "+r.URL.Path)
		ff.mu.Unlock()
		if p, ok := strings.CutPrefix(r.URL.Path, releasePrefix); ok && tree != "" {
			http.ServeFile(w, r, filepath.Join(tree, filepath.FromSlash(p)))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" && r.URL.Path == "/v1/join/registrations" {
			w.WriteHeader(201)
		}
		_ = json.NewEncoder(w).Encode(view)
	})}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ff.addr = ln.Addr().String()
	return ff
}

func (ff *fakeFounder) requested(prefix string) []string {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	var out []string
	for _, p := range ff.paths {
		if strings.Contains(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// joinAgainst runs a real `stratum join` on release rel with a hook that
// leaves a mark, and returns its exit code, output and whether the hook ran.
func joinAgainst(t *testing.T, ff *fakeFounder, rel, keys string) (int, string, bool) {
	t.Helper()
	work := t.TempDir()
	mark := filepath.Join(work, "hook-ran")
	hook := filepath.Join(work, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "join", "--founder", ff.addr, "--token", "sjt1.aaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "--ca-pin", ff.pin,
		"--release", rel, "--self-upgrade", "--upgrade-hook", hook, "--release-keys", keys,
		"--state-dir", filepath.Join(work, "state"), "--root", filepath.Join(work, "root"), "--hostname", "victim", "--mgmt-ip", "192.0.2.71")
	_, statErr := os.Stat(mark)
	return code, out, statErr == nil
}

// TestTrust04_JoinerRefusesDowngrade: a founder (here an impostor with a
// valid founder certificate, as a compromised founder would be) offers
// an upgrade to an older release, to the same release, or to a newer one
// whose signed manifest does not upgrade from the joiner's: the real
// joiner refuses each, exits 4, and runs no hook.
func TestTrust04_JoinerRefusesDowngrade(t *testing.T) {
	work := t.TempDir()
	keys := filepath.Join(work, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "release", "keygen", "--out", filepath.Join(keys, "release"))
	pub := filepath.Join(work, "pub")
	os.MkdirAll(pub, 0o755)
	copyFile(t, filepath.Join(keys, "release.pub"), filepath.Join(pub, "release.pub"))

	for _, offer := range []map[string]string{{"from": "0.3.0", "to": "0.2.0"}, {"from": "0.3.0", "to": "0.3.0"}} {
		ff := startFakeFounder(t, offer, "")
		code, out, hookRan := joinAgainst(t, ff, "0.3.0", pub)
		if code != 4 || hookRan || !strings.Contains(out, "refusing the upgrade to "+offer["to"]) {
			t.Errorf("offer %s -> %s: exit %d, hook ran %v:\n%s", offer["from"], offer["to"], code, hookRan, out)
		}
		if got := ff.requested("/release/"); len(got) != 0 {
			t.Errorf("offer %s -> %s: the joiner fetched %v", offer["from"], offer["to"], got)
		}
	}

	// Newer, signed by a trusted key, but only an upgrade from 0.1.0.
	tree := filepath.Join(work, "tree")
	os.MkdirAll(filepath.Join(tree, "sysext"), 0o755)
	os.WriteFile(filepath.Join(tree, "sysext", "x.raw"), []byte("sysext image"), 0o644)
	mustRun(t, "release", "sign", "--key", filepath.Join(keys, "release.key"), "--release", "0.4.0", "--upgrades-from", "0.1.0", tree)
	ff := startFakeFounder(t, map[string]string{"from": "0.3.0", "to": "0.4.0"}, tree)
	code, out, hookRan := joinAgainst(t, ff, "0.3.0", pub)
	if code != 4 || hookRan || !strings.Contains(out, "upgrades only from 0.1.0") {
		t.Fatalf("a manifest that does not upgrade from 0.3.0: exit %d, hook ran %v:\n%s", code, hookRan, out)
	}
	if got := ff.requested("sysext/"); len(got) != 0 {
		t.Fatalf("the joiner fetched files of a refused release: %v", got)
	}
}
