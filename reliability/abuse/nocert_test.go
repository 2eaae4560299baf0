package abuse

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// noCertAttempt opens one TLS connection to the join listener without a
// client certificate and tries a request on it. It returns "" when the
// founder refused (no HTTP answer), else what it got.
func (e *env) noCertAttempt(maxVersion uint16) (refusal string, answered string, hung bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d := &tls.Dialer{NetDialer: &net.Dialer{}, Config: &tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion}}
	conn, err := d.DialContext(ctx, "tcp", e.f.Join)
	if err != nil {
		return classify(err), "", errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
		return classify(err), "", isTimeout(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return classify(err), "", isTimeout(err)
	}
	resp.Body.Close()
	return "", resp.Status, false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// classify names a refusal briefly for the summary.
func classify(err error) string {
	s := err.Error()
	for _, k := range []string{"certificate required", "bad certificate", "handshake failure", "connection reset", "broken pipe", "EOF"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return s
}

func noCertScenarios() []scenario {
	n := scale(500, 5000)
	const workers = dialPace
	return []scenario{{
		name:   fmt.Sprintf("%d connections without a client certificate on the join listener", n),
		expect: "every one refused by TLS (no HTTP answer), none hangs; plain HTTP gets net/http's 400; a joiner with a key is served all along (/healthz 200)",
		run: func(t *testing.T, e *env, c *tally) {
			var next atomic.Int64
			var mu sync.Mutex
			kinds := map[string]int{}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			// A legitimate joiner keeps asking while the flood runs.
			var legit, legitOK atomic.Int64
			var lwg sync.WaitGroup
			lwg.Add(1)
			go func() {
				defer lwg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					a := do(e.joiner(e.k3), "GET", e.joinURL("/healthz"), nil, nil)
					legit.Add(1)
					if c.check(a.is(200, ""), "a joiner with a key during the flood: %v", a) {
						legitOK.Add(1)
					}
				}
			}()
			start := time.Now()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(n) {
							return
						}
						version := uint16(tls.VersionTLS13)
						if i%2 == 0 {
							version = tls.VersionTLS12
						}
						refusal, answered, hung := e.noCertAttempt(version)
						c.check(answered == "" && !hung, "connection %d without a certificate (TLS max %x): answered %q, hung %v, %s", i, version, answered, hung, refusal)
						mu.Lock()
						kinds[fmt.Sprintf("tls1.%d: %s", version-tls.VersionTLS10, refusal)]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			took := time.Since(start)
			close(stop)
			lwg.Wait()
			// Plain HTTP on the TLS port.
			for range 5 {
				conn, err := net.DialTimeout("tcp", e.f.Join, 5*time.Second)
				if err != nil {
					c.check(false, "plain dial: %v", err)
					continue
				}
				_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
				_, _ = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				ok := err == nil && resp.StatusCode == 400
				if err == nil {
					resp.Body.Close()
				}
				c.check(ok, "plain HTTP on the join listener: %v %v", resp, err)
				conn.Close()
			}
			c.note("%d refusals in %v (%.0f/s): %v", n, took.Round(time.Millisecond), float64(n)/took.Seconds(), kinds)
			c.note("legitimate joiner during the flood: %d of %d answered 200", legitOK.Load(), legit.Load())
			c.check(legit.Load() > 0, "the legitimate joiner never got a turn")
		},
	}}
}
