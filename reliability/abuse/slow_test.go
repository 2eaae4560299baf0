package abuse

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowKind is how a slow client starves the server.
type slowKind int

const (
	slowHandshake slowKind = iota // TCP connect, half a TLS record header, then nothing
	slowHeader                    // TLS, then the request head one byte a second, never the blank line
	slowBody                      // TLS, a complete head with Content-Length, the body one byte a second
	slowChunked                   // TLS, a chunked body, one one-byte chunk a second
)

// slowOutcome is what one slow client saw.
type slowOutcome struct {
	closedAfter time.Duration // from the start of the handshake (of the connect for slowHandshake)
	closed      bool
	how         string // "EOF" (the server closed) or the read error (a reset)
	status      string // the status line the server sent before closing, if any
	err         error
}

// slowClient runs one slow client until the server closes the connection
// or giveUp passes.
// pace bounds the connects and handshakes in progress (not the slow
// phase that follows).
func (e *env) slowClient(kind slowKind, addr string, cert *tls.Certificate, head string, giveUp time.Duration, pace chan struct{}) slowOutcome {
	pace <- struct{}{}
	paced := true
	unpace := func() {
		if paced {
			paced = false
			<-pace
		}
	}
	defer unpace()
	// start is taken before the step that starts the server's clock (the
	// connect, or the handshake): a starved goroutine of ours can only
	// make a close look later, never earlier than it was.
	start := time.Now()
	raw, err := net.DialTimeout("tcp", addr, 15*time.Second)
	if err != nil {
		return slowOutcome{err: err}
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(giveUp + 30*time.Second))
	var conn net.Conn = raw
	if kind == slowHandshake {
		// The first bytes of a TLS handshake record, then silence.
		if _, err := raw.Write([]byte{0x16, 0x03, 0x01}); err != nil {
			return slowOutcome{err: err}
		}
	} else {
		host, _, _ := net.SplitHostPort(addr)
		cfg := &tls.Config{RootCAs: e.pool, ServerName: host, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		tc := tls.Client(raw, cfg)
		start = time.Now()
		if err := tc.Handshake(); err != nil {
			return slowOutcome{err: fmt.Errorf("handshake: %w", err)}
		}
		conn = tc
	}
	unpace()

	// The reader learns when the server closes; the writer trickles.
	type end struct {
		got []byte
		err error
	}
	closed := make(chan end, 1)
	go func() {
		var got bytes.Buffer
		_, err := io.Copy(&got, conn)
		closed <- end{got.Bytes(), err}
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		switch kind {
		case slowHandshake:
			return
		case slowBody, slowChunked:
			if _, err := conn.Write([]byte(head)); err != nil {
				return
			}
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			var b []byte
			switch kind {
			case slowHeader:
				if i < len(head) {
					b = []byte{head[i]}
				} else {
					b = []byte("x") // an endless header value
				}
			case slowBody:
				b = []byte("{")
			case slowChunked:
				b = []byte("1\r\n{\r\n")
			}
			if _, err := conn.Write(b); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	select {
	case got := <-closed:
		out := slowOutcome{closedAfter: time.Since(start), closed: true, how: "EOF"}
		if got.err != nil {
			out.how = classify(got.err)
		}
		if line, _, _ := strings.Cut(string(got.got), "\r\n"); strings.HasPrefix(line, "HTTP/") {
			out.status = line
		}
		return out
	case <-time.After(giveUp):
		return slowOutcome{closedAfter: time.Since(start)}
	}
}

// slowScenarios: each slow client is cut by the server's own timeout,
// within that timeout plus a margin. They all run at once, with the rest
// of the suite.
func slowScenarios() []scenario {
	type variant struct {
		name     string
		kind     slowKind
		listener string // "admin" or "join"
		head     func(e *env) string
		timeout  time.Duration
	}
	variants := []variant{
		{"TLS handshake never finished (admin API)", slowHandshake, "admin", nil, readHeaderTimeout},
		{"TLS handshake never finished (join listener)", slowHandshake, "join", nil, readHeaderTimeout},
		{"header trickled 1 B/s (admin API)", slowHeader, "admin", func(*env) string {
			return "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
		}, readHeaderTimeout},
		{"header trickled 1 B/s (join listener)", slowHeader, "join", func(*env) string {
			return "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
		}, readHeaderTimeout},
		{"body trickled 1 B/s, Content-Length (join listener)", slowBody, "join", func(*env) string {
			return "POST /v1/join/registrations HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
		}, readTimeout},
		{"body trickled 1 B/s, chunked (admin API, authenticated)", slowChunked, "admin", func(e *env) string {
			return "POST /v1/iam/tokens HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + e.admin + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		}, readTimeout},
	}
	n := scale(10, 100)
	// The windows' slack: a full run on a two-CPU runner shared with other
	// work also measures the scheduler of both processes.
	early, late := time.Second, timeoutMargin
	if full {
		early, late = 3*time.Second, 3*timeoutMargin
	}
	return []scenario{{
		name:   fmt.Sprintf("slow clients, %d of each of %d kinds at once", n, len(variants)),
		expect: fmt.Sprintf("server closes each connection within its timeout (%v header/handshake, %v body) + %v, never before timeout - %v", readHeaderTimeout, readTimeout, late, early),
		run: func(t *testing.T, e *env, c *tally) {
			var wg sync.WaitGroup
			pace := make(chan struct{}, dialPace)
			outs := make([][]slowOutcome, len(variants))
			for vi, v := range variants {
				addr, cert := e.f.API, (*tls.Certificate)(nil)
				if v.listener == "join" {
					addr, cert = e.f.Join, &e.k3.cert
				}
				head := ""
				if v.head != nil {
					head = v.head(e)
				}
				outs[vi] = make([]slowOutcome, n)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						outs[vi][i] = e.slowClient(v.kind, addr, cert, head, v.timeout+late+10*time.Second, pace)
					}()
				}
			}
			wg.Wait()
			for vi, v := range variants {
				lo, hi := time.Duration(1<<62), time.Duration(0)
				statuses, hows := map[string]int{}, map[string]int{}
				for _, o := range outs[vi] {
					ok := o.err == nil && o.closed && o.closedAfter >= v.timeout-early && o.closedAfter <= v.timeout+late
					c.check(ok, "%s: closed=%v (%s) after %v (window %v..%v), err %v", v.name, o.closed, o.how, o.closedAfter.Round(time.Millisecond), v.timeout-early, v.timeout+late, o.err)
					if o.closed {
						hows[o.how]++
					}
					if o.closed {
						lo, hi = min(lo, o.closedAfter), max(hi, o.closedAfter)
					}
					if o.status != "" {
						statuses[o.status]++
					}
				}
				c.note("%s: closed after %v..%v (%v); what the server sent before closing: %v", v.name, lo.Round(time.Millisecond), hi.Round(time.Millisecond), hows, statuses)
			}
		},
	}}
}
