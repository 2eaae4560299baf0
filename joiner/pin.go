package joiner

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
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
// server that chains to the pinned cluster CA is the founder by
// definition, whatever address reached it.
func pinnedTLS(pin string, client tls.Certificate, serverName string) *tls.Config {
	pin = normalPin(pin)
	return &tls.Config{
		Certificates:       []tls.Certificate{client},
		ServerName:         serverName,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection: see above
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, pin, time.Now())
		},
	}
}

// verifyPinned checks that chain (leaf first, as sent) leads to a CA whose
// SPKI pin is pin.
func verifyPinned(chain []*x509.Certificate, pin string, now time.Time) error {
	if len(chain) == 0 {
		return &PinError{Want: pin, Reason: "the server presented no certificate"}
	}
	var anchor *x509.Certificate
	var seen []string
	for _, c := range chain {
		p := crypto.SPKIPin(c)
		if p == pin && c.IsCA {
			anchor = c
			break
		}
		if c.IsCA {
			seen = append(seen, p)
		}
	}
	if anchor == nil {
		reason := "its certificate chain holds no CA with that pin"
		if len(seen) > 0 {
			reason += " (it presented CA " + strings.Join(seen, ", ") + ")"
		} else {
			reason += " (it presented no CA certificate)"
		}
		return &PinError{Want: pin, Reason: reason}
	}
	roots := x509.NewCertPool()
	roots.AddCert(anchor)
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			return &PinError{Want: pin, Reason: "its certificate is outside its validity period (check this machine's clock): " + err.Error()}
		}
		return &PinError{Want: pin, Reason: "its certificate does not verify against the pinned CA: " + err.Error()}
	}
	return nil
}
