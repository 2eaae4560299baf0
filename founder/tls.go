package founder

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"stratum/crypto"
	"stratum/internal/gatherconn"
)

// serverCertificate issues a listener's certificate from the cluster CA
// at each start: the names a client may dial the founder by, and the
// founder URI SAN by which joiners and agents tell it from a member. The
// join listener's has an Ed25519 key (ed): only this build's joiners and
// agents reach it, and signing each registration's handshake with it
// costs about half an ECDSA P-256 signature; the admin listener's stays
// P-256, which browsers accept. extra are further addresses it names
// (listenerIPs).
func serverCertificate(ca *crypto.CA, clusterID, hostname, mgmtIP string, extra []net.IP, ed bool, now time.Time) (tls.Certificate, error) {
	dns := []string{"localhost"}
	if hostname != "" && hostname != "localhost" {
		dns = append(dns, hostname)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	for _, ip := range append([]net.IP{net.ParseIP(mgmtIP)}, extra...) {
		if ip != nil && !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	}
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: dns, IPs: ips, URIs: []*url.URL{crypto.FounderURI(clusterID)}, Server: true, Validity: 90 * 24 * time.Hour, Ed25519: ed}, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(append(leaf.CertPEM, ca.CertPEM()...), leaf.KeyPEM)
}

// listenerIPs are the addresses an operator may dial a listener at
// addr by, beyond the names every certificate carries: its own IP when it
// listens on one (a founder restored onto another machine keeps the old
// mgmt IP in its store), else, on every address (0.0.0.0, ::, no host),
// the host's unicast interface addresses. At most maxListenerIPs.
func listenerIPs(addr string) []net.IP {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return []net.IP{ip}
	} else if host != "" && ip == nil {
		return nil // a host name: cluster.Hostname() or localhost names it
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() && len(out) < maxListenerIPs {
			out = append(out, n.IP)
		}
	}
	return out
}

// maxListenerIPs bounds the interface addresses a certificate names.
const maxListenerIPs = 32

// joinTLS requires a client certificate of any issuer: the joiner's key
// pin is its identity, and the handshake proves it holds the key. TLS 1.3
// only (SPEC 10.10): every joiner is this build's client, so nothing
// older needs to be spoken.
//
// Session tickets are on: a waiting joiner's long-poll is answered with
// Connection: close (httpapi/longpoll.go), so each round is a new
// connection, and a resumed one skips the certificates, the founder's
// signature and the check of the joiner's (psk_dhe_ke: the key exchange
// stays, and with it forward secrecy). A TLS 1.3 ticket carries the
// client certificate of the handshake it was issued on, and a resumed
// connection reports it as its PeerCertificates, so the key pin the API
// reads from them (httpapi's joinerPin) is the key that proved itself on
// the full handshake, whatever certificate the resuming client holds: a
// ticket resumes its own key's registrations, no other's. The ticket
// keys are Go's own: random per process, rotated every 24 hours, each
// accepted for 7 days (a founder restart, or another replica, makes the
// next connection a full handshake).
func joinTLS(cert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{GetCertificate: cert, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS13}
}

// adminTLS accepts bearer tokens, and client certificates issued by the
// cluster CA for the node endpoints. TLS 1.2 and up, with AEAD suites
// only under 1.2 (1.3's are all AEAD): operators' tools may be older, but
// CBC suites are not offered.
func adminTLS(cert func(*tls.ClientHelloInfo) (*tls.Certificate, error), ca *crypto.CA) *tls.Config {
	return &tls.Config{GetCertificate: cert, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(),
		MinVersion: tls.VersionTLS12, CipherSuites: aeadSuites}
}

// aeadSuites are the TLS 1.2 suites offered on the admin listener:
// forward-secret ECDHE with AES-GCM or ChaCha20-Poly1305.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TCP keepalive of the listeners' connections: Go's defaults (probe after
// 15 s idle, every 15 s, 9 probes), so a peer that vanished mid-request is
// noticed.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 15 * time.Second
	keepAliveCount    = 9
)

// ListenJoin listens on addr as the join listener does: joinTLS over
// listenTLS. The benchmarks' stand-in servers listen with it, so that they
// measure the founder's transport.
func ListenJoin(addr string, cert tls.Certificate) (net.Listener, error) {
	return listenTLS(addr, joinTLS(fixedCert(cert)))
}

// listenTLS listens on addr with keepalive set once on the listening
// socket: Linux copies SO_KEEPALIVE and the TCP_KEEP* values into every
// accepted socket, where Go would otherwise set them again with four
// setsockopt calls per connection (each registration is one).
func listenTLS(addr string, cfg *tls.Config) (net.Listener, error) {
	lc := net.ListenConfig{
		KeepAlive: -1, // set on the listener below, inherited
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				for _, o := range []struct{ level, opt, v int }{
					{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, int(keepAliveIdle / time.Second)},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, int(keepAliveInterval / time.Second)},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, keepAliveCount},
				} {
					if serr == nil {
						serr = syscall.SetsockoptInt(int(fd), o.level, o.opt, o.v)
					}
				}
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	// A response write of the release mirror sends its TLS records in a
	// few system calls instead of one each (internal/gatherconn).
	return tls.NewListener(gatherconn.Listener(grownListener{ln}), cfg), nil
}

// grownListener hands out connections whose goroutine's stack is grown
// before the TLS handshake. A goroutine starts with a few KiB; the
// handshake's frames (X25519MLKEM768's above all) then grew it two or
// three times in its middle, each time copying and adjusting every frame
// below: 2.3% of the founder's CPU in a run of 3,000 registrations. Grown
// first, at the top of net/http's connection goroutine (its first call on
// the connection is RemoteAddr), the copy is of one frame (0.6%; 2.1 ->
// 1.2 stack growths a registration, the rest in other goroutines).
type grownListener struct{ net.Listener }

func (l grownListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &grownConn{Conn: c}, nil
}

type grownConn struct {
	net.Conn
	grown atomic.Bool
}

func (c *grownConn) RemoteAddr() net.Addr {
	if !c.grown.Swap(true) {
		growStack()
		if stackGrown != nil {
			stackGrown()
		}
	}
	return c.Conn.RemoteAddr()
}

// stackGrown, when set (by tests), is called where a connection's stack
// was grown.
var stackGrown func()

// cork sets TCP_CORK on the connection: what is written stays in the
// kernel until a full segment or the close, which sends it with the FIN.
func (c *grownConn) cork() error {
	tc, ok := c.Conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1) }); err != nil {
		return err
	}
	return serr
}

// connKey holds, in a request's context, the connection it came on
// (withConn, the server's ConnContext).
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return gatherconn.ConnContext(context.WithValue(ctx, connKey{}, c), c)
}

// joinConn is the founder's own connection under a request's TLS
// connection (nil if there is none: another listener's).
func joinConn(r *http.Request) *grownConn {
	tc, _ := r.Context().Value(connKey{}).(*tls.Conn)
	if tc == nil {
		return nil
	}
	return ownConn(tc)
}

// ownConn is the founder's connection under tc: the grownConn under the
// gatherconn.Conn listenTLS puts between them.
func ownConn(tc *tls.Conn) *grownConn {
	nc := tc.NetConn()
	if g, ok := nc.(*gatherconn.Conn); ok {
		nc = g.Conn
	}
	gc, _ := nc.(*grownConn)
	return gc
}

// corkOnClose: when the connection closes after this answer (the client
// asked, Connection: close, as a joiner registering on a connection of
// its own does), the answer, TLS's close_notify and the FIN leave the
// founder as one segment instead of three (each a trip through the
// loopback or network stack, 2 of 6 segments a registration).
//
// Only when the whole body will have been read by the close: a body
// refused unread (413 from its Content-Length) is still in the socket
// when it closes, which makes the close a reset, and a reset drops what
// the cork still holds, the 413 with it. net/http reads and discards up
// to corkBodyLimit of a body the handler left before it closes; a body
// of unknown length (chunked) may be longer, so it is not corked either.
func corkOnClose(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Close && r.ContentLength >= 0 && r.ContentLength <= corkBodyLimit {
			if gc := joinConn(r); gc != nil {
				_ = gc.cork() // an optimization: the answer goes out either way
			}
		}
		h.ServeHTTP(w, r)
	})
}

// corkBodyLimit is net/http's maxPostHandlerReadBytes: the most of a
// request body the server reads on its own after the handler, so that
// closing the connection leaves nothing unread.
const corkBodyLimit = 256 << 10

// handshakeStack is growStack's frame: the stack grows to 16 KiB, which
// holds the handshake, and is the largest size Go keeps in its
// per-processor stack caches.
const handshakeStack = 12 << 10

// growStack has a handshakeStack frame: calling it grows the stack once
// to hold it.
//
//go:noinline
func growStack() byte {
	var b [handshakeStack]byte
	return lastByte(b[:])
}

//go:noinline
func lastByte(b []byte) byte { return b[len(b)-1] }
