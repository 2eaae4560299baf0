package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"stratum/crypto"
	"stratum/wire"
)

// DefaultLeafRenewBefore is how long before its expiry the agent renews
// the node's transport leaf: a third of its 365 days.
const DefaultLeafRenewBefore = 122 * 24 * time.Hour

// leafCheckEvery is how often the agent looks at its leaf's expiry.
func leafCheckEvery(interval time.Duration) time.Duration {
	return min(max(interval, time.Second), time.Hour)
}

// leafLoop renews the node's transport leaf once less than
// LeafRenewBefore of it remains; a failure is logged and tried again at
// the next check (the current leaf counts until the new one is used,
// and until it expires).
func (a *Agent) leafLoop(ctx context.Context) {
	every := leafCheckEvery(a.cfg.Interval)
	if a.cfg.checkEvery > 0 {
		every = a.cfg.checkEvery
	}
	for ctx.Err() == nil {
		if left := time.Until(a.id.leaf().NotAfter); left < a.cfg.LeafRenewBefore {
			if err := a.renewLeaf(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("renewing the node's transport leaf failed; the current one still serves, trying again", "err", err, "expiresIn", left.Round(time.Second), "retryIn", every)
			}
		}
		if !sleep(ctx, every) {
			return
		}
	}
}

// renewLeaf asks the founder, with the current leaf, for a new one for a
// fresh P-256 key; writes the key (0600, first as node.key.next) and the
// certificate atomically; and makes every later handshake, to the
// founder and on /startupz, present it.
func (a *Agent) renewLeaf(ctx context.Context) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	req := wire.NodeLeafRenewal{PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
	var out wire.NodeLeaf
	if err := a.call(ctx, http.MethodPost, "/v1/cluster/nodes/"+url.PathEscape(a.id.nodeID)+"/leaf", req, &out, 30*time.Second); err != nil {
		return err
	}
	keyPEM, err := crypto.MarshalKeyPEM(key)
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair([]byte(out.Certificate), keyPEM)
	if err != nil {
		return fmt.Errorf("the founder's new leaf is not for the key sent: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	if err := a.id.checkLeaf(leaf); err != nil {
		return fmt.Errorf("the founder's new leaf %w", err)
	}
	// Key first, under its own name: a crash before node.key is replaced
	// leaves node.crt with a key loadIdentity finds (loadLeafPair).
	root := a.cfg.Root
	if err := crypto.WriteFileAtomic(filepath.Join(root, nodeKeyNextPath), keyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", nodeKeyNextPath, err)
	}
	if err := crypto.WriteFileAtomic(filepath.Join(root, nodeCertPath), []byte(out.Certificate), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", nodeCertPath, err)
	}
	if err := crypto.WriteFileAtomic(filepath.Join(root, nodeKeyPath), keyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", nodeKeyPath, err)
	}
	_ = os.Remove(filepath.Join(root, nodeKeyNextPath))
	old := a.id.leaf()
	a.id.setLeaf(pair, leaf)
	// The founder's connections opened with the old leaf are not reused:
	// the new leaf's first request ends the old one.
	a.transport.rotate()
	a.log.Info("node transport leaf renewed", "node", a.id.nodeID, "oldSerial", old.SerialNumber.Text(16), "serial", leaf.SerialNumber.Text(16), "notAfter", leaf.NotAfter.UTC())
	return nil
}

// rotatingTransport sends through a transport that a renewal replaces:
// the old one's connections (opened with the old leaf) finish what they
// carry and are never used again.
type rotatingTransport struct {
	cur  atomic.Pointer[http.Transport]
	make func() *http.Transport
}

func newRotatingTransport(mk func() *http.Transport) *rotatingTransport {
	t := &rotatingTransport{make: mk}
	t.cur.Store(mk())
	return t
}

func (t *rotatingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.cur.Load().RoundTrip(r)
}

// rotate starts a new transport and closes the old one's idle
// connections; a request in flight on it finishes there.
func (t *rotatingTransport) rotate() {
	t.cur.Swap(t.make()).CloseIdleConnections()
}
