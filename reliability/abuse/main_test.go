// Package abuse drives one real founder (`stratum serve`, built once with
// CGO_ENABLED=0) on loopback with hostile clients: slow headers and bodies,
// connections without a client certificate, oversized bodies and headers,
// a stampede of release reads, hostile Range headers, wait values at every
// edge, dead join tokens, other keys and other nodes' leaves, login brute
// force and path tricks, symlinks planted in the release tree included.
// Every scenario states its expected answer, counts what it tried and how
// many attempts got that answer, and fails on any other answer.
//
// ABUSE_FULL=1 runs the full counts (5,000 connections without a client
// certificate, 1,000 concurrent release reads, ...); the default run uses
// smaller ones and stays around a minute (the long-poll cap of 60 s and the
// server's 30 s ReadTimeout set the floor; the slow scenarios run
// concurrently with the rest).
package abuse

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// full is ABUSE_FULL=1: the full counts.
var full = os.Getenv("ABUSE_FULL") == "1"

// scale picks the default or the full count.
func scale(def, fullCount int) int {
	if full {
		return fullCount
	}
	return def
}

func TestMain(m *testing.M) { os.Exit(stratumtest.Main(m)) }

// mustRun runs the binary to completion and fails on a non-zero exit.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	return stratumtest.MustRun(t, args...)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// key is a joiner's identity: an ed25519 key in a self-signed certificate.
type key struct {
	name string
	cert tls.Certificate
}

// newKey is a joiner key the joiner's own code makes (the harness's).
func newKey(t *testing.T, name string) key {
	t.Helper()
	return key{name: name, cert: stratumtest.NewJoinerKey(t).Cert}
}

// selfSigned is a forged identity: priv in a self-signed certificate
// naming cn.
func selfSigned(t *testing.T, cn string, priv ed25519.PrivateKey) tls.Certificate {
	t.Helper()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}
}

// clientOpts shape one HTTP client. Every client of the suite disables
// keep-alives, so no idle connection of ours holds a server goroutine when
// the suite compares the founder's goroutines with its baseline.
type clientOpts struct {
	cert    *tls.Certificate
	force   bool   // send cert even when the server's CertificateRequest names CAs that did not issue it
	local   string // source IP, e.g. 127.0.0.2
	rcvbuf  int    // SO_RCVBUF, 0 for the default
	timeout time.Duration
}

func (e *env) client(o clientOpts) *http.Client {
	cfg := &tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12}
	if o.cert != nil {
		cfg.Certificates = []tls.Certificate{*o.cert}
	}
	if o.force {
		cert := o.cert
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	d := &net.Dialer{Timeout: 15 * time.Second}
	if o.local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.local)}
	}
	if o.rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.rcvbuf)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	switch {
	case o.timeout == 0:
		o.timeout = 90 * time.Second
	case o.timeout < 0:
		o.timeout = 0 // none: the caller bounds the exchange itself
	}
	return &http.Client{Timeout: o.timeout, Transport: &http.Transport{
		DialContext: d.DialContext, TLSClientConfig: cfg, DisableKeepAlives: true,
		TLSHandshakeTimeout: 15 * time.Second, ForceAttemptHTTP2: false,
	}}
}

// answer is one HTTP exchange as the suite judges it.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration // request written to body read
	ttfb    time.Duration // request written to the first byte of the answer (do only)
	err     error
}

// apiError is the error envelope (SPEC section 2).
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Fields  []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"fields"`
}

func (a answer) apiErr() apiError {
	var e apiError
	_ = json.Unmarshal(a.body, &e)
	return e
}

// is reports whether the answer has status and (when code is not empty)
// the JSON envelope with that code.
func (a answer) is(status int, code string) bool {
	if a.err != nil || a.status != status {
		return false
	}
	if code == "" {
		return true
	}
	return a.apiErr().Code == code && strings.HasPrefix(a.header.Get("Content-Type"), "application/json")
}

func (a answer) String() string {
	if a.err != nil {
		return fmt.Sprintf("error after %v: %v", a.elapsed.Round(time.Millisecond), a.err)
	}
	return fmt.Sprintf("%d after %v: %s", a.status, a.elapsed.Round(time.Millisecond), clip(string(a.body), 300))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
}

// do sends one request; body may be nil, []byte, an io.Reader (sent
// chunked) or anything else (sent as JSON).
func do(c *http.Client, method, url string, hdr map[string]string, body any) answer {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return answer{err: err}
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	if r, ok := body.(io.Reader); ok {
		req.Body = io.NopCloser(r) // no length: sent chunked
		req.ContentLength = -1
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json") // hdr may say otherwise
	}
	for k, v := range hdr {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	// elapsed counts from the moment the request was written, so a
	// handshake queued behind a flood does not count as server hold time.
	start := time.Now()
	var wrote, first atomic.Int64
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteHeaders:         func() { wrote.CompareAndSwap(0, time.Now().UnixNano()) },
		GotFirstResponseByte: func() { first.CompareAndSwap(0, time.Now().UnixNano()) },
	}))
	ttfb := func() time.Duration {
		if w, f := wrote.Load(), first.Load(); w != 0 && f != 0 {
			return time.Duration(f - w)
		}
		return 0
	}
	since := func() time.Duration {
		if w := wrote.Load(); w != 0 {
			return time.Since(time.Unix(0, w))
		}
		return time.Since(start)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err, elapsed: since()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: raw, err: err, elapsed: since(), ttfb: ttfb()}
}

// rawExchange writes req verbatim on a new TLS connection (no client-side
// URL cleaning or header canonicalization) and reads one response.
func (e *env) rawExchange(addr string, cert *tls.Certificate, req []byte, method string, limit time.Duration) answer {
	return e.rawFrom("", addr, cert, req, method, limit)
}

// rawFrom is rawExchange from a given source address ("" for any). The
// answer is read while the request is still being written, and a write
// cut short by the server's early answer is not an error: what counts is
// the answer the server sent.
func (e *env) rawFrom(source, addr string, cert *tls.Certificate, req []byte, method string, limit time.Duration) answer {
	start := time.Now()
	cfg := &tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	nd := &net.Dialer{Timeout: 15 * time.Second}
	if source != "" {
		nd.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	conn, err := (&tls.Dialer{NetDialer: nd, Config: cfg}).Dial("tcp", addr)
	if err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(limit))
	// Write while reading: the server may answer (413, 431) before it has
	// read everything.
	go func() { _, _ = conn.Write(req) }()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: body, err: err, elapsed: time.Since(start)}
}

// tally counts one scenario's attempts and how many got the expected answer.
type tally struct {
	mu     sync.Mutex
	t      *testing.T
	tried  int
	held   int
	failed int
	notes  []string
}

// check counts one attempt; the first failures of a scenario are reported
// in full, later ones only counted.
func (c *tally) check(ok bool, format string, args ...any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tried++
	if ok {
		c.held++
		return true
	}
	c.failed++
	if c.failed <= 8 {
		c.t.Errorf(format, args...)
	} else if c.failed == 9 {
		c.t.Errorf("... further failures of this scenario are only counted")
	}
	return false
}

// note adds a line to the scenario's summary.
func (c *tally) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// metrics reads the founder's Prometheus text.
func (e *env) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	a := do(e.plain, "GET", e.apiURL("/metrics"), nil, nil)
	if !a.is(200, "") {
		t.Fatalf("GET /metrics: %v", a)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(a.body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			out[name] = f
		}
	}
	return out
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// waitUntil polls cond every 100 ms until it holds or limit passes.
func waitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// liveConn is an established keep-alive connection, ready for a request.
type liveConn struct {
	c  *tls.Conn
	br *bufio.Reader
}

// dialPace bounds how many TLS handshakes the suite runs at once: the
// runner has two CPUs, shared with the founder, and a burst of thousands
// of handshakes would only measure the accept queue and the scheduler.
const dialPace = 32

// liveOpts shape the connections prepConns opens.
type liveOpts struct {
	addr   string
	cert   func(i int) *tls.Certificate // nil: no certificate
	source string                       // source IP, "" for any
	rcvbuf int                          // SO_RCVBUF, 0 for the default
}

// prepConns opens n keep-alive connections (handshakes paced dialPace at
// a time), each warmed by one GET /healthz, so a later burst of requests
// on them is a burst of requests, not of handshakes. The founder holds
// them under its IdleTimeout (120 s).
func (e *env) prepConns(t *testing.T, n int, o liveOpts) []*liveConn {
	t.Helper()
	conns := make([]*liveConn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, dialPace)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var cert *tls.Certificate
			if o.cert != nil {
				cert = o.cert(i)
			}
			conns[i], errs[i] = e.openLive(o, cert)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, c := range conns {
				if c != nil {
					c.c.Close()
				}
			}
			t.Fatalf("preparing connection %d of %d: %v", i, n, err)
		}
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.c.Close()
		}
	})
	return conns
}

// same is a liveOpts.cert that gives every connection cert.
func same(cert *tls.Certificate) func(int) *tls.Certificate {
	return func(int) *tls.Certificate { return cert }
}

func (e *env) openLive(o liveOpts, cert *tls.Certificate) (*liveConn, error) {
	nd := &net.Dialer{Timeout: 30 * time.Second}
	if o.source != "" {
		nd.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.source)}
	}
	if o.rcvbuf > 0 {
		nd.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.rcvbuf)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	cfg := &tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	var lastErr error
	for range 3 { // a handshake cut by an overloaded runner is retried
		c, err := (&tls.Dialer{NetDialer: nd, Config: cfg}).Dial("tcp", o.addr)
		if err != nil {
			lastErr = err
			continue
		}
		lc := &liveConn{c: c.(*tls.Conn), br: bufio.NewReader(c)}
		_ = lc.c.SetDeadline(time.Now().Add(30 * time.Second))
		resp, err := lc.do("GET", "/healthz", "", nil)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("warm-up GET /healthz: %s", resp.Status)
		}
		if err != nil {
			lc.c.Close()
			lastErr = err
			continue
		}
		_ = lc.c.SetDeadline(time.Time{})
		return lc, nil
	}
	return nil, lastErr
}

// do writes one keep-alive request and reads the answer's head; the body
// is left for the caller.
// extra is more header lines ("Name: value\r\n" each); a body is sent
// with its Content-Length.
func (lc *liveConn) do(method, target, extra string, body []byte) (*http.Response, error) {
	if body != nil {
		extra += fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	req := append([]byte(fmt.Sprintf("%s %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n", method, target, extra)), body...)
	if _, err := lc.c.Write(req); err != nil {
		return nil, err
	}
	return http.ReadResponse(lc.br, &http.Request{Method: method})
}

// exchange sends one request on lc and reads the whole answer.
func (lc *liveConn) exchange(method, target, extra string, body []byte) answer {
	_ = lc.c.SetDeadline(time.Now().Add(2 * time.Minute))
	start := time.Now()
	resp, err := lc.do(method, target, extra, body)
	if err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, err: err, elapsed: time.Since(start)}
}

// burst sends one request on every connection at the same instant and
// returns the answers in order; each connection is closed after.
func burst(conns []*liveConn, send func(i int, lc *liveConn) answer) []answer {
	out := make([]answer, len(conns))
	var ready, wg sync.WaitGroup
	ready.Add(len(conns))
	fire := make(chan struct{})
	for i, lc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-fire
			out[i] = send(i, lc)
			lc.c.Close()
		}()
	}
	ready.Wait()
	close(fire)
	wg.Wait()
	return out
}
