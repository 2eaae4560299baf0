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
	p := &Pool{roots: x509.NewCertPool(), intermediates: x509.NewCertPool()}
	roots := 0
	rest := bundle
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, want CERTIFICATE", p.count+1, blk.Type)
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", p.count+1, err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("certificate %d (%s) is not a CA", p.count+1, cert.Subject)
		}
		p.count++
		if selfSigned(cert) {
			p.roots.AddCert(cert)
			roots++
		} else {
			p.intermediates.AddCert(cert)
		}
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("trailing data that is not PEM")
	}
	if p.count == 0 {
		return nil, errors.New("no CERTIFICATE in the bundle")
	}
	if roots == 0 {
		return nil, errors.New("no self-signed root CA in the bundle")
	}
	return p, nil
}

// LoadPool reads ParsePool's bundle from a file.
func LoadPool(path string) (*Pool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePool(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
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
