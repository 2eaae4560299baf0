//go:build linux

package bench

// Joiners for BenchmarkLongPoll10k: each its own ed25519 key and
// self-signed certificate (the key is the joiner's identity), each on its
// own TLS connection, speaking hand-written HTTP/1.1 so 10,000 of them
// cost the benchmark process little.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"stratum/internal/stratumtest"
)

// lpJoiner is one joining node: its key, its registration, and while it
// long-polls, every answer it got.
type lpJoiner struct {
	i      int
	cfg    *tls.Config
	joinID string

	// tcpTook and tlsTook split the long-poll connection's set-up.
	tcpTook, tlsTook time.Duration

	mu        sync.Mutex
	firstSent time.Time  // when its first long-poll request was written
	lastSent  time.Time  // when its latest long-poll request was written
	answers   []lpAnswer // every long-poll answer, in order
	wake      chan lpAnswer
}

// lpAnswer is one long-poll answer (or the error that ended the poll).
type lpAnswer struct {
	at     time.Time     // when the whole answer had arrived
	held   time.Duration // from writing the request to at
	status int
	state  string
	err    error
}

// lpNewJoiners makes n joiners with fresh keys, in parallel.
func lpNewJoiners(n int, roots *x509.CertPool) ([]*lpJoiner, error) {
	js := make([]*lpJoiner, n)
	var next atomic.Int64
	errs := make(chan error, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cert, err := lpSelfSigned(i)
				if err != nil {
					errs <- err
					return
				}
				js[i] = &lpJoiner{i: i, wake: make(chan lpAnswer, 1), cfg: &tls.Config{
					Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12,
				}}
			}
		})
	}
	wg.Wait()
	close(errs)
	return js, <-errs
}

// lpSelfSigned is a joiner's client certificate, made by the joiner's
// own code (the harness's joiner key).
func lpSelfSigned(int) (tls.Certificate, error) {
	k, err := stratumtest.MakeJoinerKey()
	if err != nil {
		return tls.Certificate{}, err
	}
	return k.Cert, nil
}

func lpHostname(i int) string { return fmt.Sprintf("h-%d", i) }

// lpMgmtIP is a distinct address per joiner in 198.18.0.0/15.
func lpMgmtIP(i int) string { return fmt.Sprintf("198.18.%d.%d", i/250, i%250+1) }

var lpDialer = &net.Dialer{Timeout: 20 * time.Second}

// register registers the joiner with token on its own connection, closed
// after the answer, and answers how long that took (handshake included).
func (j *lpJoiner) register(host, token, release string) (time.Duration, error) {
	start := time.Now()
	conn, err := tls.DialWithDialer(lpDialer, "tcp", host, j.cfg)
	if err != nil {
		return 0, fmt.Errorf("joiner %d: dial: %w", j.i, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	body, err := json.Marshal(map[string]string{"token": token, "release": release, "hostname": lpHostname(j.i), "mgmtIp": lpMgmtIP(j.i)})
	if err != nil {
		return 0, err
	}
	if _, err := conn.Write(appendRequest(nil, "POST", host, "/v1/join/registrations", nil, body, true)); err != nil {
		return 0, fmt.Errorf("joiner %d: write: %w", j.i, err)
	}
	status, raw, _, err := readResponse(bufio.NewReader(conn))
	if err != nil {
		return 0, fmt.Errorf("joiner %d: register: %w", j.i, err)
	}
	var v struct {
		JoinID string `json:"joinId"`
		State  string `json:"state"`
	}
	if status != http.StatusCreated || json.Unmarshal(raw, &v) != nil || v.JoinID == "" || v.State != "pending" {
		return 0, fmt.Errorf("joiner %d: register: %d %s", j.i, status, raw)
	}
	j.joinID = v.JoinID
	return time.Since(start), nil
}

// lpPoll is what every waiter shares.
type lpPoll struct {
	host     string
	wait     int           // the wait= parameter, seconds
	dials    chan struct{} // bounds concurrent handshakes
	sent     sync.WaitGroup
	done     sync.WaitGroup
	stopping atomic.Bool // once set, an unchanged answer ends the poll
}

// poll dials its own connection and long-polls with state=pending,
// polling again on that connection whenever the founder answers with the
// state unchanged (as a real joiner does), until the state changes, the
// poll fails, or the benchmark is stopping.
func (j *lpJoiner) poll(p *lpPoll) {
	defer p.done.Done()
	p.dials <- struct{}{}
	conn, err := j.dial(p.host)
	if err != nil {
		<-p.dials
		j.record(lpAnswer{at: time.Now(), err: fmt.Errorf("dial: %w", err)})
		p.sent.Done()
		return
	}
	defer func() { conn.Close() }()
	br := bufio.NewReaderSize(conn, 2048)
	req := appendRequest(nil, "GET", p.host, fmt.Sprintf("/v1/join/registrations/%s?wait=%d&state=pending", j.joinID, p.wait), nil, nil, false)
	reconnect := false
	for first := true; ; first = false {
		if reconnect {
			// The founder closes a connection after answering a held
			// poll: a joiner polls again on a new one, as net/http does.
			conn.Close()
			if conn, err = j.dial(p.host); err != nil {
				j.record(lpAnswer{at: time.Now(), err: fmt.Errorf("redial: %w", err)})
				return
			}
			br = bufio.NewReaderSize(conn, 2048)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Duration(p.wait)*time.Second + time.Minute))
		sentAt := time.Now()
		_, err := conn.Write(req)
		j.mu.Lock()
		j.lastSent = sentAt
		if first {
			j.firstSent = sentAt
		}
		j.mu.Unlock()
		if first {
			<-p.dials
			p.sent.Done()
		}
		if err != nil {
			j.record(lpAnswer{at: time.Now(), err: fmt.Errorf("write: %w", err)})
			return
		}
		status, raw, closing, err := readResponse(br)
		reconnect = closing
		a := lpAnswer{at: time.Now(), status: status, err: err}
		a.held = a.at.Sub(sentAt)
		if err == nil {
			var v struct {
				State string `json:"state"`
			}
			if status != http.StatusOK || json.Unmarshal(raw, &v) != nil {
				a.err = fmt.Errorf("answer %d: %.200s", status, raw)
			}
			a.state = v.State
		}
		j.record(a)
		switch {
		case a.err != nil:
			return
		case a.state != "pending":
			j.wake <- a
			return
		case p.stopping.Load():
			return
		}
	}
}

// dial connects and completes the TLS handshake, timing both.
func (j *lpJoiner) dial(host string) (*tls.Conn, error) {
	start := time.Now()
	raw, err := lpDialer.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	j.tcpTook = time.Since(start)
	conn := tls.Client(raw, j.cfg)
	_ = conn.SetDeadline(time.Now().Add(lpDialer.Timeout))
	if err := conn.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	j.tlsTook = time.Since(start) - j.tcpTook
	return conn, nil
}

func (j *lpJoiner) record(a lpAnswer) {
	j.mu.Lock()
	j.answers = append(j.answers, a)
	j.mu.Unlock()
}

// repolled is whether the joiner's first poll was answered and it has
// written its next one since its latest answer, or it stopped polling.
func (j *lpJoiner) repolled() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.answers) == 0 {
		return false // its first poll is still held
	}
	last := j.answers[len(j.answers)-1]
	return last.err != nil || last.state != "pending" || j.lastSent.After(last.at)
}

// snapshot copies the answers so far.
func (j *lpJoiner) snapshot() (time.Time, []lpAnswer) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.firstSent, append([]lpAnswer(nil), j.answers...)
}
