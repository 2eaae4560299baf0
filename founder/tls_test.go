package founder

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stratum/crypto"
)

// TestListenTLSKeepAliveInherited: an accepted connection carries the
// keepalive set on the listening socket (Linux copies it), so the
// listeners keep probing vanished peers without setting it per accept.
func TestListenTLSKeepAliveInherited(t *testing.T) {
	cert := testServerCert(t)
	ln, err := listenTLS("127.0.0.1:0", joinTLS(fixedCert(cert)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := ownConn(c.(*tls.Conn)).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		level, opt int
		want       int
	}{
		{"SO_KEEPALIVE", syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE", syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, int(keepAliveIdle / time.Second)},
		{"TCP_KEEPINTVL", syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, int(keepAliveInterval / time.Second)},
		{"TCP_KEEPCNT", syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, keepAliveCount},
	} {
		var got int
		var gerr error
		if err := raw.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), tc.level, tc.opt) }); err != nil {
			t.Fatal(err)
		}
		if gerr != nil || got != tc.want {
			t.Errorf("%s on the accepted socket = %d (%v), want %d", tc.name, got, gerr, tc.want)
		}
	}
}

// TestListenTLSGrowsTheConnectionGoroutine: the stack is grown once a
// connection, on the goroutine that then serves it (net/http's, whose
// first call on the connection is RemoteAddr): grown anywhere else, the
// handshake would grow its own stack frame by frame again.
func TestListenTLSGrowsTheConnectionGoroutine(t *testing.T) {
	goid := func() string {
		buf := make([]byte, 64)
		f := strings.Fields(string(buf[:runtime.Stack(buf, false)]))
		return f[1] // "goroutine N [running]:"
	}
	var mu sync.Mutex
	var grownOn []string
	stackGrown = func() {
		mu.Lock()
		defer mu.Unlock()
		grownOn = append(grownOn, goid())
	}
	defer func() { stackGrown = nil }()
	ln, err := listenTLS("127.0.0.1:0", joinTLS(fixedCert(testServerCert(t))))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served <- goid() })}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{testClientCert(t)}}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	handler := <-served
	mu.Lock()
	defer mu.Unlock()
	if len(grownOn) != 1 || grownOn[0] != handler {
		t.Errorf("stack grown on goroutines %v, the request served on goroutine %s: want once, on the serving goroutine", grownOn, handler)
	}
}

// TestCorkOnClose: a request after which the connection closes
// (Connection: close) is answered on a corked socket, so the answer,
// close_notify and FIN leave together; a keep-alive request's socket is
// not corked (its answer must not wait for a close that does not come).
// Both answers arrive whole.
func TestCorkOnClose(t *testing.T) {
	ln, err := listenTLS("127.0.0.1:0", joinTLS(fixedCert(testServerCert(t))))
	if err != nil {
		t.Fatal(err)
	}
	corked := func(r *http.Request) int {
		raw, err := joinConn(r).Conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			return -1
		}
		v := -1
		_ = raw.Control(func(fd uintptr) { v, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK) })
		return v
	}
	// The handler reads a body whole before it answers, as the join API
	// does with a body under its limit.
	srv := &http.Server{Handler: corkOnClose(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Error(err)
		}
		fmt.Fprintf(w, "cork=%d %s", corked(r), strings.Repeat("x", 3000))
	})), ConnContext: withConn}
	go srv.Serve(ln)
	defer srv.Close()
	for _, tc := range []struct {
		name      string
		keepAlive bool
		body      int
		want      string
	}{
		{"connection close", false, 0, "cork=1"},
		{"connection close, a body read whole", false, 100 << 10, "cork=1"},
		// A body longer than net/http reads after the handler is not
		// corked: refused unread (413 from its length, as the join API
		// does over 1 MiB), closing over it sends a reset, which would
		// drop the 413 the cork still held (TestAbuse's oversized bodies
		// on the real binary).
		{"connection close, a body longer than the limit", false, corkBodyLimit + 1, "cork=0"},
		{"keep-alive", true, 0, "cork=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{DisableKeepAlives: !tc.keepAlive,
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{testClientCert(t)}}}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequest(http.MethodPost, "https://"+ln.Addr().String()+"/", bytes.NewReader(make([]byte, tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got := string(body); !strings.HasPrefix(got, tc.want+" ") || len(got) != len(tc.want)+1+3000 {
				t.Errorf("answer %.20q... (%d bytes), want %q and 3000 bytes", got, len(got), tc.want)
			}
		})
	}
}

// TestJoinTLSResumesWithTheFirstKey: the join listener issues session
// tickets, and a connection resumed with one reports the client
// certificate of the handshake that earned it, not the one the resuming
// client holds: the key pin stays the key that proved itself.
func TestJoinTLSResumesWithTheFirstKey(t *testing.T) {
	ln, err := listenTLS("127.0.0.1:0", joinTLS(fixedCert(testServerCert(t))))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Each connection is answered with its peer's key pin and whether it
	// was resumed.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					return
				}
				cs := tc.ConnectionState()
				_, _ = fmt.Fprintf(c, "%s %v\n", crypto.SPKIPin(cs.PeerCertificates[0]), cs.DidResume)
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	cache := tls.NewLRUClientSessionCache(4)
	dial := func(cert tls.Certificate) (pin string, resumed bool) {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, ClientSessionCache: cache,
			Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The ticket follows the handshake: reading the answer reads it.
		if _, err := fmt.Fscanf(c, "%s %t\n", &pin, &resumed); err != nil {
			t.Fatal(err)
		}
		if resumed != c.ConnectionState().DidResume {
			t.Fatalf("server says resumed=%v, client %v", resumed, c.ConnectionState().DidResume)
		}
		return pin, resumed
	}
	a, b := testClientCert(t), testClientCert(t)
	pinA := crypto.SPKIPin(mustLeaf(t, a))
	if pin, resumed := dial(a); resumed || pin != pinA {
		t.Fatalf("first connection: pin %s resumed %v, want %s and a full handshake", pin, resumed, pinA)
	}
	if pin, resumed := dial(a); !resumed || pin != pinA {
		t.Fatalf("second connection: pin %s resumed %v, want %s resumed", pin, resumed, pinA)
	}
	// Key B's certificate with key A's ticket: the server sees A.
	if pin, resumed := dial(b); !resumed || pin != pinA {
		t.Fatalf("B resuming A's ticket: pin %s resumed %v, want A's %s", pin, resumed, pinA)
	}
}

func mustLeaf(t *testing.T, c tls.Certificate) *x509.Certificate {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func testServerCert(t *testing.T) tls.Certificate {
	t.Helper()
	ca, err := crypto.NewCA("cl-tls00001", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := serverCertificate(ca, "cl-tls00001", "localhost", "", nil, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// testClientCert is a self-signed ed25519 client certificate, as a
// joiner presents.
func testClientCert(t *testing.T) tls.Certificate {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestServerCertificateKeys: the join listener's leaf is Ed25519 (a
// cheaper handshake signature per registration), the admin listener's
// ECDSA P-256 (browsers); both carry the CA after the leaf, where a
// joiner looks for its pin.
func TestServerCertificateKeys(t *testing.T) {
	ca, err := crypto.NewCA("cl-tls00001", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ed   bool
		want x509.PublicKeyAlgorithm
	}{{"join", true, x509.Ed25519}, {"admin", false, x509.ECDSA}} {
		cert, err := serverCertificate(ca, "cl-tls00001", "localhost", "", nil, tc.ed, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if leaf.PublicKeyAlgorithm != tc.want {
			t.Errorf("%s leaf key %v, want %v", tc.name, leaf.PublicKeyAlgorithm, tc.want)
		}
		chain := []*x509.Certificate{leaf}
		if len(cert.Certificate) == 2 {
			c, _ := x509.ParseCertificate(cert.Certificate[1])
			chain = append(chain, c)
		}
		if err := crypto.VerifyFounder(chain, ca.Pin(), "cl-tls00001", time.Now()); err != nil {
			t.Errorf("%s chain: %v", tc.name, err)
		}
	}
}

// TestListenerIPs: the admin certificate names the address the API
// listens on, or the host's own addresses when it listens on all of them,
// so an operator dialing the founder there is not refused by name
// (a restored founder keeps the old machine's mgmt IP).
func TestListenerIPs(t *testing.T) {
	ca, err := crypto.NewCA("cl-tls00001", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		want []string
		none bool
	}{
		{addr: "127.0.0.4:8443", want: []string{"127.0.0.4"}},
		{addr: "10.20.30.40:8443", want: []string{"10.20.30.40"}},
		{addr: "[2001:db8::7]:8443", want: []string{"2001:db8::7"}},
		{addr: "localhost:8443", none: true},
		{addr: "0.0.0.0:8443"},
		{addr: ":8443"},
	} {
		ips := listenerIPs(tc.addr)
		if tc.none && len(ips) != 0 {
			t.Errorf("%s: %v, want none", tc.addr, ips)
		}
		cert, err := serverCertificate(ca, "cl-tls00001", "localhost", "10.0.0.9", ips, false, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		want := append([]string{"127.0.0.1", "::1", "10.0.0.9"}, tc.want...)
		if tc.want == nil && !tc.none { // every address: the host's own
			for _, ip := range ips {
				want = append(want, ip.String())
			}
		}
		for _, name := range want {
			if err := leaf.VerifyHostname(name); err != nil {
				t.Errorf("%s: %v", tc.addr, err)
			}
		}
		if err := leaf.VerifyHostname("192.0.2.1"); err == nil {
			t.Errorf("%s: the certificate names an address it should not", tc.addr)
		}
	}
}
