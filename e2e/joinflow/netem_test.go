package joinflow

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// cuttingProxy forwards TCP to target and cuts the first connection that
// has carried more than cutAfter bytes towards the client: a download
// interrupted in the middle, below TLS, as a flaky network does it.
type cuttingProxy struct {
	ln       net.Listener
	target   string
	cutAfter int64
	cut      atomic.Bool
	toClient atomic.Int64
	wg       sync.WaitGroup
}

func startCuttingProxy(t *testing.T, target string, cutAfter int64) *cuttingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{ln: ln, target: target, cutAfter: cutAfter}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *cuttingProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttingProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(c)
		}()
	}
}

func (p *cuttingProxy) pipe(client net.Conn) {
	defer client.Close()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		io.Copy(server, client)
		server.Close()
	}()
	buf := make([]byte, 64<<10)
	var sent int64
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
			sent += int64(n)
			p.toClient.Add(int64(n))
			if sent > p.cutAfter && p.cut.CompareAndSwap(false, true) {
				return // the interruption
			}
		}
		if err != nil {
			return
		}
	}
}

// selfSignedClient is a joiner's client with its own key; a small rcvbuf
// lets a test hold a release slot, the founder's write blocking on it.
func selfSignedClient(t *testing.T, pool *x509.CertPool, rcvbuf int) *http.Client {
	key := stratumtest.NewJoinerKey(t)
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		if rcvbuf == 0 {
			return nil
		}
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
		return serr
	}}
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext:     dialer.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{key.Cert}},
	}}
}
