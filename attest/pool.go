package attest

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Pool is the founder's manufacturer CA pool (--ek-ca): the certificates
// an EK certificate must chain to. Self-signed certificates of the bundle
// are roots; the others are intermediates, which a chain may pass through
// but never end at.
type Pool struct {
	roots         *x509.CertPool
	intermediates *x509.CertPool
	count         int
}

// ParsePool reads a PEM bundle of CA certificates. A bundle with no
// certificate, a block that is not one, or no self-signed root is an
// error: an empty pool would silently verify nothing.
func ParsePool(bundle []byte) (*Pool, error) {
	certs, err := parseCAs(bundle)
	if err != nil {
		return nil, err
	}
	return newPool(certs)
}

// LoadPool reads the bundle from one file or several (a root and an
// issuing CA kept apart, as swtpm's local CA keeps them).
func LoadPool(paths ...string) (*Pool, error) {
	var certs []*x509.Certificate
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		c, err := parseCAs(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		certs = append(certs, c...)
	}
	return newPool(certs)
}

// parseCAs parses every CERTIFICATE block of b, each a CA.
func parseCAs(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		n := len(certs) + 1
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, want CERTIFICATE", n, blk.Type)
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n, err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("certificate %d (%s) is not a CA", n, cert.Subject)
		}
		certs = append(certs, cert)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("trailing data that is not PEM")
	}
	if len(certs) == 0 {
		return nil, errors.New("no CERTIFICATE in the bundle")
	}
	return certs, nil
}

func newPool(certs []*x509.Certificate) (*Pool, error) {
	p := &Pool{roots: x509.NewCertPool(), intermediates: x509.NewCertPool(), count: len(certs)}
	roots := 0
	for _, c := range certs {
		if selfSigned(c) {
			p.roots.AddCert(c)
			roots++
		} else {
			p.intermediates.AddCert(c)
		}
	}
	if roots == 0 {
		return nil, errors.New("no self-signed root CA among the certificates")
	}
	return p, nil
}

// Len is the number of CA certificates in the pool.
func (p *Pool) Len() int {
	if p == nil {
		return 0
	}
	return p.count
}

func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}
