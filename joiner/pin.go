package joiner

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"

	"stratum/crypto"
)

// pinnedTLS is the TLS configuration for the join listener.
//
// The trust root is the CA pin, not the system roots nor a host name: the
// joiner learns the founder's address and the pin from the same token
// command line, and the founder's certificate names whatever the founder
// believes its names are (localhost, its hostname, its mgmt IP), which
// need not be what the joiner dialled (a NAT address, a VIP). So the usual
// verification is off (InsecureSkipVerify) and VerifyConnection does all
// of it instead: the chain the server presents must contain a CA
// certificate whose SPKI hashes to the pin, and the leaf must verify up to
// that CA (signature, validity, server-auth usage). The handshake itself
// proves the server holds the leaf's key. Host names are not checked: a
// server whose leaf chains to the pinned cluster CA and carries the
// founder URI SAN is the founder, whatever address reached it.
//
// tickets keeps the founder's TLS session tickets, so that the next
// connection (each long-poll round is one: the founder closes it after
// its answer) resumes instead of a full handshake. Go calls
// VerifyConnection on a resumed connection too, with the certificates
// the ticket's first handshake verified, so the pin is checked on every
// connection alike.
func pinnedTLS(pin string, client tls.Certificate, serverName string, tickets tls.ClientSessionCache) *tls.Config {
	pin = normalPin(pin)
	return &tls.Config{
		Certificates:       []tls.Certificate{client},
		ServerName:         serverName,
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: tickets,
		InsecureSkipVerify: true, // replaced by VerifyConnection: see above
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, pin, time.Now())
		},
	}
}

// verifyPinned checks that chain (leaf first, as sent) leads to a CA whose
// SPKI pin is pin and that its leaf is the founder's (SPEC 10.3): a
// member's leaf chains to the same CA and must not receive our token.
func verifyPinned(chain []*x509.Certificate, pin string, now time.Time) error {
	if err := crypto.VerifyFounder(chain, pin, "", now); err != nil {
		var fe *crypto.FounderTrustError
		if errors.As(err, &fe) {
			return &PinError{Want: pin, Reason: fe.Reason}
		}
		return &PinError{Want: pin, Reason: err.Error()}
	}
	return nil
}

// newTicketCache is one run's TLS session cache: the join listener's
// tickets and a mirror's, each under its own scope (scopedTickets). It
// belongs to the run's one key: a ticket resumes the key of the
// handshake it was issued on, whatever certificate the resuming client
// holds, so a cache is never shared between keys.
func newTicketCache() tls.ClientSessionCache { return tls.NewLRUClientSessionCache(16) }

// scopedTickets keeps one client's tickets apart in a shared cache. Go
// keys a ticket by the server name, and a mirror may be served from the
// founder's host (its admin listener): without a scope each would evict
// the other's ticket, and offer the server a ticket it cannot open.
type scopedTickets struct {
	scope string
	cache tls.ClientSessionCache
}

func (s scopedTickets) Get(key string) (*tls.ClientSessionState, bool) {
	return s.cache.Get(s.scope + "|" + key)
}

func (s scopedTickets) Put(key string, cs *tls.ClientSessionState) {
	s.cache.Put(s.scope+"|"+key, cs)
}
