package soak

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"stratum/internal/stratumtest"
	"strings"
	"testing"
	"time"
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
	mustRun(t, "release", "keygen", "--out", filepath.Join(keys, "release"))
	mustRun(t, "release", "sign", "--key", filepath.Join(keys, "release.key"), "--release", clusterRelease, "--upgrades-from", olderRelease, tree)
	pub, err := os.ReadFile(filepath.Join(keys, "release.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pubDir, "release.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return tree, pubDir
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
	pub, err := os.ReadFile(filepath.Join(pubDir, "release.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "release-keys", "release.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "release", "import", "--data", dir, tree); !strings.Contains(out, clusterRelease) {
		t.Fatalf("import output does not name the release: %s", out)
	}
	return dir
}

// founder is a running `stratum serve` child process.
type founder struct {
	cmd     *exec.Cmd
	dir     string
	api     string // https://host:port of the admin API
	join    string // host:port of the join listener
	pid     int
	pool    *x509.CertPool
	logPath string
	exited  chan struct{}
	exitErr error
}

var bannerLine = regexp.MustCompile(`^\s+(admin API|join listener):\s+(\S+)`)

// startFounder runs `stratum serve` on dir with ephemeral ports; its
// output goes to a file (a long soak would not fit in memory).
func startFounder(t *testing.T, dir string, extra ...string) *founder {
	t.Helper()
	args := append([]string{"serve", "--data", dir, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(stratumtest.Binary(t), args...)
	cmd.Env = stratumtest.Env()
	logPath := filepath.Join(filepath.Dir(dir), "founder.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &founder{cmd: cmd, dir: dir, pid: cmd.Process.Pid, logPath: logPath, exited: make(chan struct{})}
	ready := make(chan [2]string, 1)
	go func() {
		var api, join string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = logFile.WriteString(line + "\n")
			if m := bannerLine.FindStringSubmatch(line); m != nil {
				if m[1] == "admin API" {
					api = m[2]
				} else {
					join = strings.TrimPrefix(m[2], "https://")
				}
				if api != "" && join != "" {
					ready <- [2]string{api, join}
				}
			}
		}
		_, _ = io.Copy(logFile, stdout)
	}()
	go func() {
		f.exitErr = cmd.Wait()
		logFile.Close()
		close(f.exited)
	}()
	select {
	case a := <-ready:
		f.api, f.join = a[0], a[1]
	case <-f.exited:
		t.Fatalf("founder exited (%v) before serving:\n%s", f.exitErr, f.logTail(4096))
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("founder did not print its listeners within 60s:\n%s", f.logTail(4096))
	}
	t.Cleanup(func() { f.stop(t) })
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	f.pool = x509.NewCertPool()
	if !f.pool.AppendCertsFromPEM(pem) {
		t.Fatal("ca.pem holds no certificate")
	}
	return f
}

// stop sends SIGINT and waits for a clean exit.
func (f *founder) stop(t *testing.T) {
	select {
	case <-f.exited:
		return
	default:
	}
	_ = f.cmd.Process.Signal(os.Interrupt)
	select {
	case <-f.exited:
		if f.exitErr != nil {
			t.Errorf("founder exit after SIGINT: %v\n%s", f.exitErr, f.logTail(4096))
		}
	case <-time.After(30 * time.Second):
		_ = f.cmd.Process.Kill()
		t.Errorf("founder ignored SIGINT for 30s")
	}
}

// logTail is the last n bytes of the founder's output.
func (f *founder) logTail(n int64) string {
	b, err := os.ReadFile(f.logPath)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// logLines counts the founder's log lines at each level.
func (f *founder) logLevels() (map[string]int, []string) {
	b, _ := os.ReadFile(f.logPath)
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
func (f *founder) adminClient(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: f.pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}}
}
