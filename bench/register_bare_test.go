package bench

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/founder"
	"stratum/internal/stratumtest"
)

// The floor under BenchmarkRegisterCPU's figure: what a bare Go HTTPS
// server costs per connection when the same joiners (the same net/http
// client, fresh TLS connection each, ed25519 client certificate, the same
// POST) reach it with the join listener's TLS settings (TLS 1.3 only,
// X25519MLKEM768, an Ed25519 leaf and the CA after it, any client
// certificate required, a session ticket sent; founder/tls.go) and the
// founder's http.Server timeouts, and its handler only reads the body and
// answers 201 with as many bytes as the founder answered. No routing, no
// store, no audit: the TLS handshake, TCP and net/http alone. It runs in
// a child process (this test binary again, TestRegisterBareServer) whose
// CPU is read from /proc as the founder's is.

// bareServer is the bare server's child process and its clients.
type bareServer struct {
	pid      int
	clients  []*tls.Config
	post     func(i int) error
	idleRate float64 // its CPU while idle, CPU seconds a second
	workers  int
}

// startBareServer starts the bare server, its clients (cfgs with the bare
// server's CA as their root; one connection each), answering answerBytes
// bytes a request. It stops when the benchmark ends.
func startBareServer(b *testing.B, cfgs []*tls.Config, workers, answerBytes int) *bareServer {
	work := b.TempDir()
	ca, err := crypto.NewCA("cl-bare00001", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, URIs: []*url.URL{crypto.FounderURI("cl-bare00001")},
		Server: true, Validity: time.Hour, Ed25519: true}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	certFile, keyFile := filepath.Join(work, "cert.pem"), filepath.Join(work, "key.pem")
	if err := os.WriteFile(certFile, append(leaf.CertPEM, ca.CertPEM()...), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(keyFile, leaf.KeyPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	port, err := mirrorFreePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestRegisterBareServer$", "-test.count=1", "-test.timeout=1h")
	cmd.Env = append(os.Environ(), "REGISTER_BARE_CHILD=1", "REGISTER_BARE_CERT="+certFile, "REGISTER_BARE_KEY="+keyFile,
		"REGISTER_BARE_ADDR="+addr, "REGISTER_BARE_ANSWER="+strconv.Itoa(answerBytes))
	stop, exited := mirrorStart(b, cmd, filepath.Join(work, "bare.out"), true)
	b.Cleanup(stop)
	pid := cmd.Process.Pid
	clients := make([]*tls.Config, len(cfgs))
	for i, c := range cfgs {
		clients[i] = c.Clone()
		clients[i].RootCAs = ca.Pool()
	}
	post := func(i int) error {
		tr := &http.Transport{TLSClientConfig: clients[i], DisableKeepAlives: true, DisableCompression: true}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: time.Minute}
		resp, err := client.Post("https://"+addr+"/v1/join/registrations", "application/json",
			strings.NewReader(`{"token":"stj.bare.0000000000000000","release":"`+lpRelease+`","hostname":"`+lpHostname(i)+`","mgmtIp":"`+lpMgmtIP(i)+`"}`))
		if err != nil {
			return fmt.Errorf("bare server, joiner %d: %w", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("bare server, joiner %d: %s", i, resp.Status)
		}
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for post(0) != nil {
		select {
		case <-exited:
			out, _ := os.ReadFile(filepath.Join(work, "bare.out"))
			b.Fatalf("the bare server exited:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatal("the bare server did not answer in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	idle0 := stratumtest.ProcRunTime(pid)
	time.Sleep(time.Second)
	return &bareServer{pid: pid, clients: clients, post: post, workers: workers,
		idleRate: float64(stratumtest.ProcRunTime(pid)-idle0) / float64(time.Second)}
}

// measure makes connections lo..hi-1 (a fresh one each, workers at once)
// and answers the bare server's CPU over them, less its idle CPU over as
// long (to the nanosecond: stratumtest.ProcRunTime), and the system part
// of it (in ticks).
func (s *bareServer) measure(b *testing.B, lo, hi int) (cpu, sys time.Duration) {
	_, sys0 := stratumtest.ProcCPU(s.pid)
	run0 := stratumtest.ProcRunTime(s.pid)
	start := time.Now()
	if err := concurrently(s.workers, lo, hi, s.post); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	_, sys1 := stratumtest.ProcCPU(s.pid)
	run1 := stratumtest.ProcRunTime(s.pid)
	return run1 - run0 - time.Duration(s.idleRate*float64(took)), sys1 - sys0
}

// TestRegisterBareServer is the bare server of registerBareCPU (skipped
// otherwise): the join listener's TLS settings and the founder's
// http.Server timeouts, a handler that reads the body and answers 201. It
// returns when its stdin is closed.
func TestRegisterBareServer(t *testing.T) {
	if os.Getenv("REGISTER_BARE_CHILD") != "1" {
		t.Skip("the bare server of BenchmarkRegisterCPU")
	}
	followAffinity()
	cert, err := tls.LoadX509KeyPair(os.Getenv("REGISTER_BARE_CERT"), os.Getenv("REGISTER_BARE_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(os.Getenv("REGISTER_BARE_ANSWER"))
	if err != nil {
		t.Fatal(err)
	}
	answer := []byte(`{"joinId":"j-00000000","pad":"` + strings.Repeat("x", max(0, n-32)) + `"}` + "\n")
	// The join listener's transport and server settings, without the
	// founder's handler.
	ln, err := founder.ListenJoin(os.Getenv("REGISTER_BARE_ADDR"), cert)
	if err != nil {
		t.Fatal(err)
	}
	srv := founder.NewHTTPServer(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/v1/join/registrations/j-00000000")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(answer)
		}), slog.New(slog.DiscardHandler))
	go srv.Serve(ln)
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}
