// Package bootprobe is the founder's boot-health prober (SPEC 11): it asks
// every member's agent for its /startupz over mTLS and keeps each
// member's last answer in memory, for the members lists and the bundle's
// nodes[].
package bootprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"stratum/cluster"
	"stratum/crypto"
)

// Defaults of SPEC 11.
const (
	DefaultInterval    = 15 * time.Second
	DefaultTimeout     = 2 * time.Second
	DefaultConcurrency = 32
	DefaultPort        = 9444
)

// Target is one member to probe.
type Target struct {
	NodeID string
	MgmtIP string
}

// Config wires a Prober.
type Config struct {
	// Members lists what to probe, each round.
	Members func() ([]Target, error)
	// Self is the founder's node id; its boot health is SelfBoot's, not
	// probed over the network.
	Self     string
	SelfBoot func() cluster.Boot
	// ClientCert gives the founder's client leaf (renewed as it ages);
	// CAs verify the agents' leaves.
	ClientCert  func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	CAs         *x509.CertPool
	Port        int
	Interval    time.Duration
	Timeout     time.Duration
	Concurrency int
	Log         *slog.Logger
}

// Prober probes members and remembers what they said.
type Prober struct {
	cfg    Config
	mu     sync.RWMutex
	states map[string]cluster.Boot
}

// New fills the defaults; it starts nothing (the founder's scheduler
// runs Round every Interval).
func New(cfg Config) (*Prober, error) {
	if cfg.Members == nil {
		return nil, errors.New("bootprobe: no members to probe")
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Prober{cfg: cfg, states: map[string]cluster.Boot{}}, nil
}

// Boot is a member's last probed boot health; false until it was probed.
func (p *Prober) Boot(nodeID string) (cluster.Boot, bool) {
	if nodeID == p.cfg.Self && p.cfg.SelfBoot != nil {
		return p.cfg.SelfBoot(), true
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	b, ok := p.states[nodeID]
	return b, ok
}

// Interval is how often the founder's scheduler runs a Round.
func (p *Prober) Interval() time.Duration { return p.cfg.Interval }

// Round probes every member once, at most Concurrency at a time, and
// forgets members that are gone.
func (p *Prober) Round(ctx context.Context) {
	targets, err := p.cfg.Members()
	if err != nil {
		p.cfg.Log.Warn("boot prober: listing members failed", "err", err)
		return
	}
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	results := make(map[string]cluster.Boot, len(targets))
	var mu sync.Mutex
	for _, tg := range targets {
		if tg.NodeID == p.cfg.Self {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func(tg Target) {
			defer func() { <-sem; wg.Done() }()
			b := p.probe(ctx, tg)
			mu.Lock()
			results[tg.NodeID] = b
			mu.Unlock()
		}(tg)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, b := range results {
		prev, seen := p.states[id]
		if b.State == cluster.BootUnreachable && seen {
			// The last boot's duration stays known while the node is away.
			b.LastBootMs = prev.LastBootMs
			results[id] = b
		}
		if !seen || prev.State != b.State {
			p.cfg.Log.Info("member boot state", "node", id, "state", b.State, "phase", b.Phase)
		}
	}
	p.states = results
}

// startupz is the agent's answer.
type startupz struct {
	State   string `json:"state"`
	Phase   string `json:"phase"`
	PhaseMs int64  `json:"phaseMs"`
	BootMs  int64  `json:"bootMs"`
}

// probe asks one agent. Anything but a well-formed answer from that
// node's own leaf is unreachable.
func (p *Prober) probe(ctx context.Context, tg Target) cluster.Boot {
	unreachable := cluster.Boot{State: cluster.BootUnreachable}
	if net.ParseIP(tg.MgmtIP) == nil {
		return unreachable
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	tr := &http.Transport{
		Proxy:             nil,
		TLSClientConfig:   p.tlsFor(tg.NodeID),
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{Timeout: p.cfg.Timeout}).DialContext,
	}
	defer tr.CloseIdleConnections()
	url := "https://" + net.JoinHostPort(tg.MgmtIP, strconv.Itoa(p.cfg.Port)) + "/startupz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return unreachable
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		p.cfg.Log.Debug("boot probe failed", "node", tg.NodeID, "err", err)
		return unreachable
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil || resp.StatusCode != http.StatusOK {
		return unreachable
	}
	var s startupz
	if err := json.Unmarshal(raw, &s); err != nil || (s.State != cluster.BootReady && s.State != cluster.BootStarting) ||
		s.PhaseMs < 0 || s.BootMs < 0 || len(s.Phase) > 64 {
		p.cfg.Log.Debug("boot probe: not a startupz answer", "node", tg.NodeID)
		return unreachable
	}
	return cluster.Boot{State: s.State, Phase: s.Phase, PhaseMs: s.PhaseMs, LastBootMs: s.BootMs}
}

// tlsFor trusts only the leaf the cluster CA issued to nodeID: another
// member, or the founder's own leaf, answering at that address is not it.
func (p *Prober) tlsFor(nodeID string) *tls.Config {
	return &tls.Config{
		GetClientCertificate: p.cfg.ClientCert,
		MinVersion:           tls.VersionTLS12,
		InsecureSkipVerify:   true, // replaced by VerifyConnection: the name checked is the node id
		VerifyConnection: func(cs tls.ConnectionState) error {
			return VerifyNode(cs.PeerCertificates, p.cfg.CAs, nodeID, time.Now())
		},
	}
}

// VerifyNode checks a node's leaf (first in chain): issued by the cluster
// CA for server auth, CommonName nodeID, no founder URI SAN.
func VerifyNode(chain []*x509.Certificate, cas *x509.CertPool, nodeID string, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("the agent presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cas, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("the agent's certificate does not verify against the cluster CA: %w", err)
	}
	if leaf.Subject.CommonName != nodeID || crypto.HasStratumURI(leaf) {
		return fmt.Errorf("the certificate at this address is %q's, not node %s's", leaf.Subject.CommonName, nodeID)
	}
	return nil
}
