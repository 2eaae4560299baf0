package soak

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// mustRun runs the binary to completion and fails the test on a non-zero
// exit.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	return stratumtest.MustRun(t, args...)
}

// Releases of the soak: the cluster runs clusterRelease; an upgrader
// registers on olderRelease and is offered the imported clusterRelease.
const (
	clusterRelease = "0.2.0"
	olderRelease   = "0.1.0"
)

// releaseTree writes and signs a small release (a few MiB, files that do
// and do not end on a 1 MiB chunk boundary) and returns the tree and a
// directory holding only its public key.
func releaseTree(t *testing.T, work string) (tree, pubDir string) {
	t.Helper()
	tree = filepath.Join(work, "tree")
	keys := filepath.Join(work, "keys")
	pubDir = filepath.Join(work, "pub")
	for _, d := range []string{filepath.Join(tree, "os", "blobs", "sha256"), filepath.Join(tree, "sysext"), keys, pubDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	blob := func(size int) []byte {
		b := make([]byte, size)
		for i := 0; i+8 <= len(b); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8; j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		return b
	}
	for _, size := range []int{3<<20 + 300<<10, 3 << 19, 1 << 20} {
		b := blob(size)
		sum := sha256.Sum256(b)
		if err := os.WriteFile(filepath.Join(tree, "os", "blobs", "sha256", hex.EncodeToString(sum[:])), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tree, "sysext", "stratum-ovs.raw"), blob(64<<10+17), 0o644); err != nil {
		t.Fatal(err)
	}
	rk := stratumtest.NewReleaseKey(t, keys)
	mustRun(t, "release", "sign", "--key", rk.Key, "--release", clusterRelease, "--upgrades-from", olderRelease, tree)
	return tree, rk.CopyPub(t, pubDir)
}

// initFounder creates a cluster on clusterRelease that trusts pubDir's key
// and has tree imported.
func initFounder(t *testing.T, work, tree, pubDir string) string {
	t.Helper()
	dir := filepath.Join(work, "founder")
	cfg := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(cfg, []byte("parentDomain: stratum.example.com\nregion: lab-1\nclusterRelease: "+clusterRelease+"\ndnsUpstreamServers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "init", "--data", dir, "--config", cfg)
	stratumtest.ReleaseKey{Pub: filepath.Join(pubDir, "release.pub")}.Trust(t, dir)
	if out := mustRun(t, "release", "import", "--data", dir, tree); !strings.Contains(out, clusterRelease) {
		t.Fatalf("import output does not name the release: %s", out)
	}
	return dir
}

// logLevels counts the founder's log lines at each level.
func logLevels(f *stratumtest.Founder) (map[string]int, []string) {
	b := []byte(f.Output())
	levels := map[string]int{}
	var errs []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		i := bytes.Index(line, []byte("level="))
		if i < 0 {
			continue
		}
		lvl := string(bytes.Fields(line[i+len("level="):])[0])
		levels[lvl]++
		if (lvl == "ERROR" || lvl == "WARN") && len(errs) < 20 {
			errs = append(errs, string(line))
		}
	}
	return levels, errs
}

// adminClient trusts only the cluster CA; cert, when given, is a node's
// transport leaf for the node endpoints.
func adminClient(f *stratumtest.Founder, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: f.Pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 4, IdleConnTimeout: clientIdle}}
}

// clientIdle is how long the soak's clients keep an idle connection:
// less than the founder's ReadHeaderTimeout (10 s). Go's Transport parks
// a connection it dialed for a request that another connection served
// first, unused, in its idle pool; the founder closes a connection that
// sent no request for 10 s (a header timeout: its 120 s IdleTimeout is
// for connections between requests). A POST sent on such a connection
// as the founder closes it fails with EOF, and a POST is not retried:
// one "admin token create" in a 30-minute soak (12,059 answers) failed
// so. Closing idle connections first leaves no such race.
const clientIdle = 5 * time.Second
