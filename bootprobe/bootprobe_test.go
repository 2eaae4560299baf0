package bootprobe

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"stratum/cluster"
	"stratum/crypto"
)

type lab struct {
	t      *testing.T
	ca     *crypto.CA
	port   int
	client tls.Certificate
}

func newLab(t *testing.T) *lab {
	ca, err := crypto.NewCA("cl-test0001", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// One port, several loopback addresses: the prober has one agent port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", URIs: nil, Client: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	client, _ := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	return &lab{t: t, ca: ca, port: port, client: client}
}

// clientCert is the prober's client leaf, as Config.ClientCert gives it.
func (l *lab) clientCert(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return &l.client, nil
}

// agent serves h at ip:port with nodeID's leaf, requiring a client leaf
// of the cluster CA as the real agent does.
func (l *lab) agent(ip, nodeID string, h http.HandlerFunc) {
	leaf, err := l.ca.Issue(crypto.LeafRequest{CommonName: nodeID, DNSNames: []string{nodeID}, IPs: []net.IP{net.ParseIP(ip)}, Client: true, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		l.t.Fatal(err)
	}
	cert, _ := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	ln, err := tls.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(l.port)), &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: l.ca.Pool()})
	if err != nil {
		l.t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	l.t.Cleanup(func() { srv.Close() })
}

func answer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/startupz" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
	}
}

func TestRound(t *testing.T) {
	l := newLab(t)
	l.agent("127.0.0.2", "n-ready001", answer(`{"state":"ready","phase":"serving","phaseMs":10,"bootMs":900}`))
	l.agent("127.0.0.3", "n-start001", answer(`{"state":"starting","phase":"membership","phaseMs":20,"bootMs":0}`))
	l.agent("127.0.0.4", "n-other001", answer(`{"state":"ready","phase":"serving","phaseMs":1,"bootMs":1}`)) // answers for another node
	l.agent("127.0.0.5", "n-garbl001", answer(`{"state":"fine"}`))
	l.agent("127.0.0.6", "n-slow0001", func(w http.ResponseWriter, r *http.Request) { time.Sleep(3 * time.Second) })
	targets := []Target{
		{"n-founder1", "127.0.0.1"}, {"n-ready001", "127.0.0.2"}, {"n-start001", "127.0.0.3"},
		{"n-spoofed1", "127.0.0.4"}, {"n-garbl001", "127.0.0.5"}, {"n-slow0001", "127.0.0.6"},
		{"n-nobody01", "127.0.0.7"}, {"n-noaddr01", ""},
	}
	p := mustNew(t, Config{Members: func() ([]Target, error) { return targets, nil }, Self: "n-founder1",
		SelfBoot:   func() cluster.Boot { return cluster.Boot{State: cluster.BootReady, Phase: "serving"} },
		ClientCert: l.clientCert, CAs: l.ca.Pool(), Port: l.port, Timeout: 500 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if _, ok := p.Boot("n-ready001"); ok {
		t.Fatal("a member not probed yet has a boot state")
	}
	start := time.Now()
	p.Round(context.Background())
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("a round with a hung agent took %v; the timeout is 500ms", el)
	}
	want := map[string]cluster.Boot{
		"n-founder1": {State: "ready", Phase: "serving"},
		"n-ready001": {State: "ready", Phase: "serving", PhaseMs: 10, LastBootMs: 900},
		"n-start001": {State: "starting", Phase: "membership", PhaseMs: 20},
		"n-spoofed1": {State: "unreachable"},
		"n-garbl001": {State: "unreachable"},
		"n-slow0001": {State: "unreachable"},
		"n-nobody01": {State: "unreachable"},
		"n-noaddr01": {State: "unreachable"},
	}
	for id, w := range want {
		if got, ok := p.Boot(id); !ok || got != w {
			t.Errorf("%s: %+v %v, want %+v", id, got, ok, w)
		}
	}
	// A member that goes away keeps its last boot duration; one removed
	// is forgotten.
	targets = []Target{{"n-ready001", "127.0.0.9"}}
	p.Round(context.Background())
	if got, _ := p.Boot("n-ready001"); got != (cluster.Boot{State: "unreachable", LastBootMs: 900}) {
		t.Errorf("gone away: %+v", got)
	}
	if _, ok := p.Boot("n-start001"); ok {
		t.Error("a removed member keeps its boot state")
	}
}

// TestConcurrencyBound: never more probes in flight than the bound.
func TestConcurrencyBound(t *testing.T) {
	l := newLab(t)
	var inFlight, peak atomic.Int32
	l.agent("127.0.0.2", "n-busy0001", func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		inFlight.Add(-1)
		io.WriteString(w, `{"state":"ready","phase":"serving","phaseMs":1,"bootMs":1}`)
	})
	var targets []Target
	// Every target is the same agent under the same node id: only the
	// bound matters here.
	for range 40 {
		targets = append(targets, Target{"n-busy0001", "127.0.0.2"})
	}
	p := mustNew(t, Config{Members: func() ([]Target, error) { return targets, nil }, ClientCert: l.clientCert, CAs: l.ca.Pool(), Port: l.port, Concurrency: 4, Log: slog.New(slog.DiscardHandler)})
	p.Round(context.Background())
	if got := peak.Load(); got < 2 || got > 4 {
		t.Fatalf("peak %d probes in flight, bound 4", got)
	}
	if b, _ := p.Boot("n-busy0001"); b.State != "ready" {
		t.Fatal(fmt.Sprint(b))
	}
}

func mustNew(t *testing.T, cfg Config) *Prober {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
