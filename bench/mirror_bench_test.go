package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/founder"
	"stratum/httpapi"
	"stratum/internal/gcfloor"
	"stratum/internal/selfcpu"
	"stratum/internal/stratumtest"
	"stratum/release"
	"stratum/release/repo"
	"stratum/store"
)

// The tree and the load of BenchmarkMirrorVsNginx.
const (
	mirrorRelease   = "1.0.0"
	mirrorBigPath   = "os/image.raw"
	mirrorSmallPath = "os/index.json"
	mirrorBigSize   = 1 << 30
	// mirrorBlockSize random bytes are written again and again to make the
	// big file quickly; its chunk hashes then repeat, which changes nothing
	// for the server (every chunk is still read and hashed).
	mirrorBlockSize = 64 << 20
	// mirrorParallel full downloads run at once in case parallel4.
	mirrorParallel = 4
	// Case range64k: mirrorRanges requests of mirrorRangeSize bytes at
	// random offsets, from mirrorRangeClients keep-alive connections.
	mirrorRangeSize    = 64 << 10
	mirrorRanges       = 2000
	mirrorRangeClients = 4
	// mirrorRounds runs of a download case on each server, the order of
	// the two servers alternating from round to round (an even number:
	// each goes first as often); the best throughput and the median CPU
	// are reported. A round is a second or a few, a range round a fraction
	// of one, so one stall of the shared machine moved a ratio by up to
	// 0.4 between runs of the same binary when each case ran twice: more
	// rounds, still alternating, make each server's best round one the
	// machine left alone.
	mirrorRounds      = 4
	mirrorRangeRounds = 8
	// mirrorSlots is the founder's semaphore: high enough that no request
	// of the benchmark is refused with RELEASE_BUSY.
	mirrorSlots = 64
	// mirrorRequestTimeout bounds one request, so a hung server fails the
	// benchmark rather than the test binary's -timeout.
	mirrorRequestTimeout = 3 * time.Minute
	// mirrorStatsPath is the founder child's answer with its cache
	// counters: units sent from the cache, units read and hashed.
	mirrorStatsPath = "/_stats"
)

// mirrorTargets are SPEC section 21's: the founder's throughput over
// nginx's, per case, with its cache of verified units off and on.
var mirrorTargets = map[string]float64{"full": 1.0, "parallel4": 1.2, "range64k": 0.8}

// mirrorPinnedTargets are issue 35's, of the pinned form (each server on
// a core of its own, the clients on the other: pinning_test.go), for the
// founder as `stratum serve` runs it (its default cache): `target
// mirror-CASE-pinned`. The nocache variant's pinned ratios are printed
// beside them, without a target.
var mirrorPinnedTargets = map[string]float64{"parallel4": 1.5, "range64k": 1.2}

// mirrorVariants are the founder's two settings, measured one after the
// other against nginx (one founder child at a time: they share the store
// file): "nocache" is `serve --release-cache 0`, "cache" the default cache
// (or MIRROR_CACHE_BYTES).
var mirrorVariants = []struct{ name, cacheBytes string }{{"nocache", "-1"}, {"cache", os.Getenv("MIRROR_CACHE_BYTES")}}

// BenchmarkMirrorVsNginx compares the founder's release mirror
// (httpapi.ServeReleaseFile over repo.Mirror, which sends only bytes
// checked against the BLAKE3 index of every 16 KiB unit, read from disk or
// from its default-sized cache of verified chunks) with nginx serving the
// same imported tree from the same disk, both over TLS on loopback with
// the same certificate, both read by Go clients in this process:
//
//   - full: one download of the 1 GiB file;
//   - parallel4: four downloads of it at once (aggregate throughput);
//   - range64k: 2,000 requests for 64 KiB at random offsets from four
//     keep-alive connections.
//
// It prints one line per case, the founder's and nginx's MiB/s and their
// ratio, one with each server's CPU seconds per GiB sent, and a "target"
// line with the ratio, SPEC section 14's target, pass or MISS, and the
// share of units the founder sent from its cache (the big file repeats a
// 64 MiB block, but the cache is keyed by position, not content: the
// repetition gives it nothing). The founder
// runs in a child process (this test binary again, TestMirrorFounderServer)
// so that its CPU is read from /proc like nginx's, apart from the
// clients'; MIRROR_FOUNDER_CPUPROFILE=FILE has each child write a CPU
// profile (FILE.nocache, FILE.cache), MIRROR_CASES=range64k (comma-separated) runs only the cases
// named, MIRROR_CACHE_BYTES=N gives the founder a cache of N bytes (-1:
// none) instead of the default. nginx comes from Debian's package (bench/nginx.sh install,
// which the benchmark runs when nginx is missing; without root it cannot,
// and the benchmark is skipped) and is started by bench/nginx.sh with a
// generated configuration.
//
//	go test -run '^$' -bench MirrorVsNginx -benchtime 1x -timeout 20m ./bench/
func BenchmarkMirrorVsNginx(b *testing.B) {
	nginx := mirrorFindNginx()
	if nginx == "" {
		// Debian's package, installed by the script when this runs as root.
		out, err := exec.Command("sh", "nginx.sh", "install").CombinedOutput()
		if nginx = mirrorFindNginx(); nginx == "" {
			b.Skipf("nginx is not installed and bench/nginx.sh install failed (%v): %s\n"+
				"install Debian's nginx package (as root: bench/nginx.sh install) and run this benchmark again",
				err, bytes.TrimSpace(out))
		}
	}
	e := newMirrorEnv(b, nginx)
	for b.Loop() {
		for _, v := range mirrorVariants {
			stop := e.startFounder(b, v.name, v.cacheBytes)
			settle(b) // the benchmark before, and the release files written
			samples := e.measure(b)
			stop()
			e.report(b, v.name, samples)
		}
	}
}

func mirrorFindNginx() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if st, err := os.Stat("/usr/sbin/nginx"); err == nil && st.Mode().IsRegular() {
		return "/usr/sbin/nginx"
	}
	return ""
}

// mirrorEnv is the imported release, the two servers and what the clients
// need to reach them.
type mirrorEnv struct {
	block      []byte      // the big file is this block repeated
	clientTLS  *tls.Config // trusts the CA, presents a joiner's certificate
	founderURL string
	// nginx is the free form's (2 workers, one a core); nginxOne the
	// pinned form's (1 worker, as nginx's `worker_processes auto` has it
	// on one core, where the founder's runtime has GOMAXPROCS 1).
	nginx, nginxOne nginxServer
	// where startFounder finds what it needs
	dataDir, certFile, keyFile, work string
	founderPID                       int
	nginxVer                         string
	offsets                          []int64 // of the ranged requests, the same for both servers
}

// nginxServer is one running nginx: its master's pid and its URL.
type nginxServer struct {
	pid int
	url string
}

// mirrorServers names the two servers in the order of the printed figures.
var mirrorServers = []string{"founder", "nginx"}

// server is the URL and pid of server in the free or the pinned form.
func (e *mirrorEnv) server(server string, pinned bool) (url string, pid int) {
	switch {
	case server == "founder":
		return e.founderURL, e.founderPID
	case pinned:
		return e.nginxOne.url, e.nginxOne.pid
	}
	return e.nginx.url, e.nginx.pid
}

func newMirrorEnv(b *testing.B, nginx string) *mirrorEnv {
	setup := time.Now()
	tmp := b.TempDir()
	// The imported tree is read-only; make it removable again for
	// TempDir's cleanup, which runs after this one.
	b.Cleanup(func() { mirrorMakeWritable(tmp) })
	src, dataDir, work := filepath.Join(tmp, "src"), filepath.Join(tmp, "data"), filepath.Join(tmp, "nginx")
	for _, d := range []string{src, dataDir, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}

	e := &mirrorEnv{block: make([]byte, mirrorBlockSize)}
	rand.NewChaCha8([32]byte{'m', 'i', 'r', 'r', 'o', 'r'}).Read(e.block)
	if err := mirrorWriteTree(src, e.block); err != nil {
		b.Fatal(err)
	}

	// Sign, import into a fresh store, drop the source: what an operator
	// does with `stratum release keygen/sign/import`.
	keyName := filepath.Join(tmp, "release-key")
	if _, err := release.Keygen(keyName); err != nil {
		b.Fatal(err)
	}
	if _, err := release.Sign(src, keyName+".key", mirrorRelease, nil); err != nil {
		b.Fatal(err)
	}
	pub, err := release.LoadPublicKey(keyName + ".pub")
	if err != nil {
		b.Fatal(err)
	}
	keys, err := release.NewKeyring(1, pub)
	if err != nil {
		b.Fatal(err)
	}
	dataKey, err := crypto.LoadOrCreateDataKey(filepath.Join(dataDir, "data.key"), true)
	if err != nil {
		b.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dataDir, "stratum.db"), dataKey)
	if err != nil {
		b.Fatal(err)
	}
	importStart := time.Now()
	r, err := repo.New(repo.Config{DB: db, DataDir: dataDir, Keys: keys, CacheBytes: -1})
	if err == nil {
		_, err = r.Import(context.Background(), src, repo.ImportOptions{})
	}
	importTook := time.Since(importStart)
	// The founder's process opens the store next (bbolt locks it).
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := os.RemoveAll(src); err != nil {
		b.Fatal(err)
	}
	root := filepath.Join(dataDir, "releases", mirrorRelease)

	// TLS as the founder sets it up: an ECDSA P-256 leaf of the cluster CA
	// sent with the CA certificate; the join listener asks every client
	// for a certificate, so the clients present one (to nginx as well).
	ca, err := crypto.NewCA("bench", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Validity: 24 * time.Hour}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	chain := append(slices.Clip(leaf.CertPEM), ca.CertPEM()...)
	joiner, err := ca.Issue(crypto.LeafRequest{CommonName: "bench joiner", Client: true, Validity: 24 * time.Hour}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(joiner.CertPEM, joiner.KeyPEM)
	if err != nil {
		b.Fatal(err)
	}
	e.clientTLS = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12}
	certFile, keyFile := filepath.Join(work, "cert.pem"), filepath.Join(work, "key.pem")
	if err := os.WriteFile(certFile, chain, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(keyFile, leaf.KeyPEM, 0o600); err != nil {
		b.Fatal(err)
	}

	e.dataDir, e.certFile, e.keyFile, e.work = dataDir, certFile, keyFile, work
	e.nginx = e.startNginx(b, nginx, work, 2, certFile, keyFile, root)
	if canPin() {
		e.nginxOne = e.startNginx(b, nginx, filepath.Join(work, "one-core"), 1, certFile, keyFile, root)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	e.offsets = make([]int64, mirrorRanges)
	for i := range e.offsets {
		e.offsets[i] = rng.Int64N(mirrorBigSize - mirrorRangeSize + 1)
	}
	fmt.Printf("mirror setup: %d MiB tree signed and imported (import %v) in %v; %s; cpus=%d GOMAXPROCS=%d loadavg=%s\n",
		mirrorBigSize>>20, importTook.Round(time.Millisecond), time.Since(setup).Round(time.Millisecond),
		e.nginxVer, runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAvg())
	return e
}

// mirrorWriteTree writes the release tree: the big file and a small one.
func mirrorWriteTree(dir string, block []byte) error {
	if err := os.MkdirAll(filepath.Join(dir, "os"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(mirrorSmallPath)), []byte(`{"layers":1}`+"\n"), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, filepath.FromSlash(mirrorBigPath)))
	if err != nil {
		return err
	}
	for written := 0; written < mirrorBigSize; written += len(block) {
		if _, err := f.Write(block[:min(len(block), mirrorBigSize-written)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func mirrorMakeWritable(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}

// startFounder runs the founder's side in a child process: this test
// binary again, running TestMirrorFounderServer. It stops when its stdin
// is closed, at the end of the benchmark.
// startFounder starts the founder's child of variant (nocache, cache)
// with a cache of cacheBytes (empty: the default; -1: none); stop ends
// it. Its CPU profile, if asked for, is MIRROR_FOUNDER_CPUPROFILE.variant.
func (e *mirrorEnv) startFounder(b *testing.B, variant, cacheBytes string) (stop func()) {
	dataDir, certFile, keyFile, work := e.dataDir, e.certFile, e.keyFile, e.work
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	port, err := mirrorFreePort()
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"-test.run=^TestMirrorFounderServer$", "-test.count=1", "-test.timeout=1h"}
	if p := os.Getenv("MIRROR_FOUNDER_CPUPROFILE"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			b.Fatal(err)
		}
		args = append(args, "-test.cpuprofile="+abs+"."+variant)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "MIRROR_FOUNDER_CHILD=1", "MIRROR_FOUNDER_DATA="+dataDir,
		"MIRROR_FOUNDER_CERT="+certFile, "MIRROR_FOUNDER_KEY="+keyFile, "MIRROR_FOUNDER_ADDR="+addr,
		"MIRROR_CACHE_BYTES="+cacheBytes)
	logPath := filepath.Join(work, "founder.out")
	end, exited := mirrorStart(b, cmd, logPath, true)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			end()
			if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
				out, _ := os.ReadFile(logPath)
				b.Errorf("founder server: %v\n%s", cmd.ProcessState, out)
			}
		})
	}
	b.Cleanup(stop)
	e.founderPID = cmd.Process.Pid
	e.founderURL = "https://" + addr
	if err := e.waitReady(e.founderURL, exited); err != nil {
		out, _ := os.ReadFile(logPath)
		b.Fatalf("the founder server did not come up: %v\n%s", err, out)
	}
	return stop
}

// mirrorStart starts cmd with its output in logPath, in its own process
// group, sent SIGTERM if this process dies. stop ends it: its stdin is
// closed, and with byStdin that is enough (the founder's child returns and
// writes its profile); else, or if it does not exit, SIGTERM (for nginx a
// fast shutdown, in which the master stops its workers), then SIGKILL to
// the group.
func mirrorStart(b *testing.B, cmd *exec.Cmd, logPath string, byStdin bool) (stop func(), exited <-chan struct{}) {
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	pid := cmd.Process.Pid
	return func() {
		stdin.Close()
		if byStdin {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Second):
			}
		}
		syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-pid, syscall.SIGKILL)
			<-done
		}
	}, done
}

// TestMirrorFounderServer is the founder's process of
// BenchmarkMirrorVsNginx (skipped otherwise): it serves ServeReleaseFile the way
// the founder's join listener does (tls.Listen with its TLS settings,
// http.Server with its timeouts), minus the routing and the joiner checks:
// GET /<path> is the file <path> of the release. An error before the body
// is a 503 with the error's text. It returns when its stdin is closed.
func TestMirrorFounderServer(t *testing.T) {
	if os.Getenv("MIRROR_FOUNDER_CHILD") != "1" {
		t.Skip("the founder's process of BenchmarkMirrorVsNginx")
	}
	followAffinity()
	dataDir := os.Getenv("MIRROR_FOUNDER_DATA")
	cert, err := tls.LoadX509KeyPair(os.Getenv("MIRROR_FOUNDER_CERT"), os.Getenv("MIRROR_FOUNDER_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	dataKey, err := crypto.LoadOrCreateDataKey(filepath.Join(dataDir, "data.key"), false)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dataDir, "stratum.db"), dataKey)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The founder's defaults but for the slots: the cache of verified
	// chunks is repo.DefaultCacheBytes() (an eighth of the memory, 256 MiB
	// to 2 GiB), as `stratum serve` has it, unless MIRROR_CACHE_BYTES says
	// otherwise (-1: none).
	var cacheBytes int64
	if v := os.Getenv("MIRROR_CACHE_BYTES"); v != "" {
		if cacheBytes, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("MIRROR_CACHE_BYTES: %v", err)
		}
	}
	// The heap goal's floor `stratum serve` keeps (without it this
	// process, whose live heap without the cache is a few MiB, collected
	// every few hundred ranges, which the founder does not).
	defer gcfloor.Keep(gcfloor.DefaultFloor)()
	m, err := repo.New(repo.Config{DB: db, DataDir: dataDir, Concurrency: mirrorSlots, CacheBytes: cacheBytes, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The join listener's transport and server settings.
	ln, err := founder.ListenJoin(os.Getenv("MIRROR_FOUNDER_ADDR"), cert)
	if err != nil {
		t.Fatal(err)
	}
	srv := founder.NewHTTPServer(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mirrorStatsPath {
				fmt.Fprintf(w, "%d %d %d", m.CacheHits(), m.CacheMisses(), runtime.GOMAXPROCS(0))
				return
			}
			if err := httpapi.ServeReleaseFile(w, r, m, r.RemoteAddr, mirrorRelease, strings.TrimPrefix(r.URL.Path, "/")); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			}
		}), slog.New(slog.DiscardHandler))
	go srv.Serve(ln)
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	m.Close()
	if n := m.BusyCount(); n > 0 {
		t.Errorf("refused %d requests with RELEASE_BUSY: raise mirrorSlots", n)
	}
	if n := m.CorruptCount(); n > 0 {
		t.Errorf("found %d files corrupt", n)
	}
}

// startNginx runs bench/nginx.sh, which writes the configuration and
// becomes nginx (daemon off) with workers worker processes: its pid is
// the master's. It is stopped, with its workers, when the benchmark ends.
func (e *mirrorEnv) startNginx(b *testing.B, nginx, work string, workers int, certFile, keyFile, root string) nginxServer {
	if err := os.MkdirAll(work, 0o700); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-v").CombinedOutput(); err == nil {
		e.nginxVer = strings.TrimSpace(strings.TrimPrefix(string(out), "nginx version: "))
	}
	script, err := filepath.Abs("nginx.sh")
	if err != nil {
		b.Fatal(err)
	}
	port, err := mirrorFreePort()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("sh", script, "run", work, strconv.Itoa(port), certFile, keyFile, root)
	cmd.Env = append(os.Environ(), "NGINX="+nginx, "NGINX_WORKERS="+strconv.Itoa(workers))
	logPath := filepath.Join(work, "nginx.out")
	stop, exited := mirrorStart(b, cmd, logPath, false)
	b.Cleanup(stop)
	// The script execs nginx: its pid is the master's.
	srv := nginxServer{pid: cmd.Process.Pid, url: "https://127.0.0.1:" + strconv.Itoa(port)}
	if err := e.waitReady(srv.url, exited); err != nil {
		out, _ := os.ReadFile(logPath)
		errLog, _ := os.ReadFile(filepath.Join(work, "error.log"))
		b.Fatalf("nginx did not come up: %v\n%s%s", err, out, errLog)
	}
	return srv
}

func mirrorFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls the small file until the server answers it, for ten
// seconds at most or until exited is closed.
func (e *mirrorEnv) waitReady(base string, exited <-chan struct{}) error {
	client := &http.Client{Transport: e.transport(), Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(base + "/" + mirrorSmallPath)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == `{"layers":1}`+"\n" {
				return nil
			}
			err = fmt.Errorf("GET %s: %s: %q", mirrorSmallPath, resp.Status, body)
		}
		select {
		case <-exited:
			return errors.New("the process exited")
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// transport is a fresh client: HTTP/1.1 (what the founder's listener
// speaks), no compression, keep-alive.
func (e *mirrorEnv) transport() *http.Transport {
	var protos http.Protocols
	protos.SetHTTP1(true)
	return &http.Transport{
		TLSClientConfig:     e.clientTLS.Clone(),
		Protocols:           &protos,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 2 * max(mirrorParallel, mirrorRangeClients),
		ReadBufferSize:      64 << 10,
	}
}

// mirrorSample is one run of one case on one server.
type mirrorSample struct {
	bytes     int64
	requests  int
	elapsed   time.Duration
	clientCPU time.Duration // this process: the clients
	serverCPU time.Duration // the server's process and its children
	tls       string
	// cacheHits and cacheMisses are the founder's units (64 KiB) sent
	// from its cache of verified chunks and read and hashed.
	cacheHits, cacheMisses uint64
}

func (s mirrorSample) mibs() float64 { return float64(s.bytes) / (1 << 20) / s.elapsed.Seconds() }
func (s mirrorSample) rps() float64  { return float64(s.requests) / s.elapsed.Seconds() }

// mirrorCase is one load; run sends it to base and returns what it read.
type mirrorCase struct {
	name   string
	rounds int
	run    func(e *mirrorEnv, base string) (mirrorSample, error)
}

var mirrorCases = []mirrorCase{
	{"full", mirrorRounds, func(e *mirrorEnv, base string) (mirrorSample, error) { return e.downloads(base, 1) }},
	{"parallel4", mirrorRounds, func(e *mirrorEnv, base string) (mirrorSample, error) { return e.downloads(base, mirrorParallel) }},
	{"range64k", mirrorRangeRounds, (*mirrorEnv).ranges},
}

// mirrorSelectedCases are the cases MIRROR_CASES names (comma-separated,
// for a profile of one load), else all of them.
func mirrorSelectedCases() []mirrorCase {
	names := os.Getenv("MIRROR_CASES")
	if names == "" {
		return mirrorCases
	}
	var out []mirrorCase
	for _, c := range mirrorCases {
		if slices.Contains(strings.Split(names, ","), c.name) {
			out = append(out, c)
		}
	}
	return out
}

// measure runs every case its rounds on each server: the founder first
// in even rounds, nginx first in odd ones, so that neither always runs
// after the other on a noisy machine.
func (e *mirrorEnv) measure(b *testing.B) map[string]map[string][]mirrorSample {
	out := map[string]map[string][]mirrorSample{}
	rounds := 0
	for _, c := range mirrorSelectedCases() {
		out[c.name] = map[string][]mirrorSample{}
		rounds = max(rounds, c.rounds)
	}
	forms := []bool{false}
	if canPin() {
		forms = append(forms, true)
	}
	for round := range rounds {
		order := mirrorServers
		if round%2 == 1 {
			order = []string{mirrorServers[1], mirrorServers[0]}
		}
		for _, pinned := range forms {
			unpin := func() {}
			if pinned {
				var err error
				if unpin, err = pinForm(e.founderPID, e.nginxOne.pid); err != nil {
					b.Fatalf("pin the servers and the clients: %v", err)
				}
			}
			e.measureRound(b, round, pinned, order, out)
			unpin()
		}
	}
	return out
}

// measureRound runs round of every case on each server in order, in the
// free or the pinned form, into out (the pinned form's under
// CASE-pinned).
func (e *mirrorEnv) measureRound(b *testing.B, round int, pinned bool, order []string, out map[string]map[string][]mirrorSample) {
	for _, c := range mirrorSelectedCases() {
		if round >= c.rounds {
			continue
		}
		name := c.name + formName(pinned)
		if out[name] == nil {
			out[name] = map[string][]mirrorSample{}
		}
		for _, server := range order {
			runtime.GC()
			url, pid := e.server(server, pinned)
			hits0, misses0, _ := e.founderCache(b, server)
			client0, server0 := selfcpu.Total(), mirrorTreeCPU(pid)
			s, err := c.run(e, url)
			if err != nil {
				b.Fatalf("round %d, case %s, %s: %v", round, c.name, server, err)
			}
			s.clientCPU, s.serverCPU = selfcpu.Total()-client0, mirrorTreeCPU(pid)-server0
			hits1, misses1, procs := e.founderCache(b, server) // GOMAXPROCS as it served
			s.cacheHits, s.cacheMisses = hits1-hits0, misses1-misses0
			fmt.Printf("mirror run round=%d case=%s server=%s mibs=%.0f requests=%d elapsed=%v server_cpu=%v client_cpu=%v cache_hits=%d cache_misses=%d founder_gomaxprocs=%d\n",
				round, name, server, s.mibs(), s.requests, s.elapsed.Round(time.Millisecond),
				s.serverCPU.Round(10*time.Millisecond), s.clientCPU.Round(10*time.Millisecond), s.cacheHits, s.cacheMisses, procs)
			out[name][server] = append(out[name][server], s)
		}
	}
}

// report prints, for each case, the best throughput of each server and
// their ratio, then the median over the rounds of each server's CPU
// seconds per GiB sent (and per request for ranges), of the clients' when
// reading from it, and efficiency = nginx's CPU / the founder's.
func (e *mirrorEnv) report(b *testing.B, variant string, samples map[string]map[string][]mirrorSample) {
	for _, c := range mirrorSelectedCases() {
		for _, pinned := range []bool{false, true} {
			if samples[c.name+formName(pinned)] != nil {
				e.reportCase(b, variant, c.name, pinned, samples[c.name+formName(pinned)])
			}
		}
	}
	first := mirrorSelectedCases()[0].name
	f, n := mirrorBest(samples[first]["founder"]), mirrorBest(samples[first]["nginx"])
	fmt.Printf("mirror tls founder=%s nginx=%s loadavg=%s\n", f.tls, n.tls, loadAvg())
}

// reportCase prints one case's lines in one form (pinned: the servers on
// one core, the clients on the other; its name is CASE-pinned).
func (e *mirrorEnv) reportCase(b *testing.B, variant, caseName string, pinned bool, samples map[string][]mirrorSample) {
	name := caseName + formName(pinned)
	fs, ns := samples["founder"], samples["nginx"]
	f, n := mirrorBest(fs), mirrorBest(ns)
	ratio := f.mibs() / n.mibs()
	line := fmt.Sprintf("mirror %s case=%s founder_mibs=%.0f nginx_mibs=%.0f ratio=%.2f", variant, name, f.mibs(), n.mibs(), ratio)
	if caseName == "range64k" {
		line += fmt.Sprintf(" founder_rps=%.0f nginx_rps=%.0f", f.rps(), n.rps())
	}
	fmt.Println(line)

	perGiB := func(s mirrorSample, d time.Duration) float64 { return d.Seconds() / (float64(s.bytes) / (1 << 30)) }
	fCPU := mirrorMedian(fs, func(s mirrorSample) float64 { return perGiB(s, s.serverCPU) })
	nCPU := mirrorMedian(ns, func(s mirrorSample) float64 { return perGiB(s, s.serverCPU) })
	cf := mirrorMedian(fs, func(s mirrorSample) float64 { return perGiB(s, s.clientCPU) })
	cn := mirrorMedian(ns, func(s mirrorSample) float64 { return perGiB(s, s.clientCPU) })
	line = fmt.Sprintf("mirror cpu case=%s founder_s_per_gib=%.2f nginx_s_per_gib=%.2f efficiency=%.2f client_s_per_gib=%.2f/%.2f",
		name, fCPU, nCPU, nCPU/fCPU, cf, cn)
	if caseName == "range64k" {
		perReq := float64(mirrorRangeSize) / (1 << 30) * 1e6
		line += fmt.Sprintf(" founder_us_per_req=%.0f nginx_us_per_req=%.0f", fCPU*perReq, nCPU*perReq)
	}
	fmt.Println(line)
	var hits, units uint64
	for _, s := range fs {
		hits, units = hits+s.cacheHits, units+s.cacheHits+s.cacheMisses
	}
	target, ok := mirrorTargets[caseName]
	if pinned {
		target, ok = mirrorPinnedTargets[caseName]
	}
	verdict := "pass"
	if ratio < target {
		verdict = "MISS"
	}
	want := fmt.Sprintf("want>=%.1f %s", target, verdict)
	if !ok {
		want = "(no target)"
	}
	fmt.Printf("mirror %s case=%s founder_over_nginx=%.2f %s (founder %.0f MiB/s at %.2f s CPU/GiB, nginx %.0f MiB/s at %.2f s CPU/GiB; founder sent %.0f%% of its 64 KiB units from its cache)\n",
		variant, name, ratio, want, f.mibs(), fCPU, n.mibs(), nCPU, 100*float64(hits)/float64(max(units, 1)))
	switch {
	case !pinned:
		printTarget(b, "mirror-"+caseName+"-"+variant, ratio, ">=", target, "x")
	case ok && variant == "cache":
		printTarget(b, "mirror-"+name, ratio, ">=", target, "x")
	}
	b.ReportMetric(f.mibs(), name+"_"+variant+"_founder_MiB/s")
	b.ReportMetric(n.mibs(), name+"_"+variant+"_nginx_MiB/s")
	b.ReportMetric(ratio, name+"_"+variant+"_ratio")
	b.ReportMetric(nCPU/fCPU, name+"_"+variant+"_cpu_efficiency")
}

// founderCache reads the founder child's cache counters (zero for nginx)
// and its GOMAXPROCS (1 while pinned to one core: its runtime follows
// the affinity).
func (e *mirrorEnv) founderCache(b *testing.B, server string) (hits, misses uint64, procs int) {
	if server != "founder" {
		return 0, 0, 0
	}
	client := &http.Client{Transport: e.transport(), Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(e.founderURL + mirrorStatsPath)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := fmt.Fscan(resp.Body, &hits, &misses, &procs); err != nil {
		b.Fatalf("founder cache counters: %v", err)
	}
	return hits, misses, procs
}

// mirrorMedian is the median of v over ss.
func mirrorMedian(ss []mirrorSample, v func(mirrorSample) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = v(s)
	}
	return median(xs)
}

// mirrorBest is the run with the highest throughput.
func mirrorBest(ss []mirrorSample) mirrorSample {
	return slices.MaxFunc(ss, func(x, y mirrorSample) int {
		switch {
		case x.mibs() < y.mibs():
			return -1
		case x.mibs() > y.mibs():
			return 1
		}
		return 0
	})
}

// downloads reads the big file par times at once, each on its own
// connection, checking every byte.
func (e *mirrorEnv) downloads(base string, par int) (mirrorSample, error) {
	tr := e.transport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	errs := make([]error, par)
	tlsSeen := make([]string, par)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range par {
		wg.Go(func() {
			tlsSeen[i], errs[i] = e.get(client, base, -1, make([]byte, 64<<10))
		})
	}
	wg.Wait()
	s := mirrorSample{bytes: int64(par) * mirrorBigSize, requests: par, elapsed: time.Since(start), tls: tlsSeen[0]}
	return s, errors.Join(errs...)
}

// ranges sends the ranged requests from mirrorRangeClients workers, each
// on its own keep-alive connection.
func (e *mirrorEnv) ranges(base string) (mirrorSample, error) {
	tr := e.transport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var next atomic.Int64
	errs := make([]error, mirrorRangeClients)
	tlsSeen := make([]string, mirrorRangeClients)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range mirrorRangeClients {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(e.offsets)) {
					return
				}
				if tlsSeen[w], errs[w] = e.get(client, base, e.offsets[i], buf); errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	s := mirrorSample{bytes: int64(len(e.offsets)) * mirrorRangeSize, requests: len(e.offsets), elapsed: time.Since(start), tls: tlsSeen[0]}
	return s, errors.Join(errs...)
}

// get reads the big file whole (off < 0) or mirrorRangeSize bytes of it
// from off, checks the status, the length and every byte, and returns the
// TLS version and cipher suite used. buf is the copy buffer.
func (e *mirrorEnv) get(client *http.Client, base string, off int64, buf []byte) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mirrorRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+mirrorBigPath, nil)
	if err != nil {
		return "", err
	}
	want, wantStatus := int64(mirrorBigSize), http.StatusOK
	if off >= 0 {
		want, wantStatus = mirrorRangeSize, http.StatusPartialContent
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+mirrorRangeSize-1))
	} else {
		off = 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != wantStatus {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("%s: %s, want %d: %s", req.Header.Get("Range"), resp.Status, wantStatus, bytes.TrimSpace(body))
	}
	if resp.ContentLength != want {
		return "", fmt.Errorf("%s: Content-Length %d, want %d", req.Header.Get("Range"), resp.ContentLength, want)
	}
	check := &mirrorCheck{block: e.block, off: off}
	n, err := io.CopyBuffer(check, resp.Body, buf)
	if err != nil {
		return "", fmt.Errorf("%s: after %d bytes: %w", req.Header.Get("Range"), n, err)
	}
	if n != want {
		return "", fmt.Errorf("%s: %d bytes, want %d", req.Header.Get("Range"), n, want)
	}
	return tls.VersionName(resp.TLS.Version) + "/" + tls.CipherSuiteName(resp.TLS.CipherSuite), nil
}

// mirrorCheck compares what it is written with the big file from off.
type mirrorCheck struct {
	block []byte
	off   int64
}

func (c *mirrorCheck) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := int(c.off % int64(len(c.block)))
		k := min(len(p), len(c.block)-i)
		if !bytes.Equal(p[:k], c.block[i:i+k]) {
			return 0, fmt.Errorf("wrong bytes at offset %d", c.off)
		}
		p = p[k:]
		c.off += int64(k)
	}
	return n, nil
}

// mirrorTreeCPU is the CPU time of process pid and of its children (the
// nginx master and its workers), from /proc.
func mirrorTreeCPU(pid int) time.Duration {
	var total time.Duration
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, d := range entries {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if ppid, user, sys, ok := stratumtest.ProcStat(p); ok && (p == pid || ppid == pid) {
			total += user + sys
		}
	}
	return total
}
