package founder

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// renewingCert keeps one of the founder's own certificates current: its
// listeners' and its prober's client leaf. Each is issued for 90 days at
// start; an appliance that runs longer, as a founder does, would
// otherwise serve an expired certificate to every joiner, agent and
// operator (and probe no agent). It is issued again at the first
// handshake after two thirds of its life (day 60), while the old one,
// still valid, serves meanwhile and if issuing fails (logged; tried again
// at the next handshake).
type renewingCert struct {
	name  string // "admin API", "join listener", "prober", for the log
	issue func(now time.Time) (tls.Certificate, error)
	now   func() time.Time
	log   *slog.Logger

	cur     atomic.Pointer[tls.Certificate]
	renewAt atomic.Int64 // unix nanoseconds
	mu      sync.Mutex   // one issue at a time
}

// newRenewingCert issues the first certificate.
func newRenewingCert(name string, issue func(time.Time) (tls.Certificate, error), now func() time.Time, log *slog.Logger) (*renewingCert, error) {
	l := &renewingCert{name: name, issue: issue, now: now, log: log}
	c, err := issue(now())
	if err != nil {
		return nil, err
	}
	return l, l.set(c)
}

func (l *renewingCert) set(c tls.Certificate) error {
	if c.Leaf == nil {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return err
		}
		c.Leaf = leaf
	}
	life := c.Leaf.NotAfter.Sub(c.Leaf.NotBefore)
	l.renewAt.Store(c.Leaf.NotBefore.Add(life * 2 / 3).UnixNano())
	l.cur.Store(&c)
	return nil
}

// server is a listener's tls.Config.GetCertificate.
func (l *renewingCert) server(*tls.ClientHelloInfo) (*tls.Certificate, error) { return l.current() }

// client is a client's tls.Config.GetClientCertificate.
func (l *renewingCert) client(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return l.current()
}

// current is the certificate, issued again once due.
func (l *renewingCert) current() (*tls.Certificate, error) {
	if l.now().UnixNano() < l.renewAt.Load() {
		return l.cur.Load(), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := l.now(); now.UnixNano() >= l.renewAt.Load() {
		c, err := l.issue(now)
		if err == nil {
			err = l.set(c)
		}
		if err != nil {
			l.log.Warn("issuing the "+l.name+"'s certificate again failed; the current one serves until it expires",
				"notAfter", l.cur.Load().Leaf.NotAfter, "err", err.Error())
			return l.cur.Load(), nil
		}
		l.log.Info("issued the "+l.name+"'s certificate again", "notAfter", l.cur.Load().Leaf.NotAfter)
	}
	return l.cur.Load(), nil
}

// fixedCert serves one certificate for good (tests and the benchmarks'
// stand-in servers).
func fixedCert(c tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &c, nil }
}
