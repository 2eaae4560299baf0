package crypto

import (
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"time"
)

// The founder's listener leaves carry the URI SAN stratum://<clusterId>/founder.
// Every leaf the cluster CA issues chains to the pinned CA, node leaves
// included (they have server auth for the node's own listeners), so the CA
// pin alone cannot tell the founder from a member that pretends to be it:
// this SAN can. Node leaves never carry a stratum:// URI.
const founderURIScheme = "stratum"

// FounderURI is the URI SAN of the founder's listener leaves.
func FounderURI(clusterID string) *url.URL {
	return &url.URL{Scheme: founderURIScheme, Host: clusterID, Path: "/founder"}
}

// founderClusterOf returns the cluster id a founder URI SAN names, or ""
// when cert carries none.
func founderClusterOf(cert *x509.Certificate) string {
	for _, u := range cert.URIs {
		if u.Scheme == founderURIScheme && u.Path == "/founder" && u.Host != "" && u.User == nil && u.RawQuery == "" && u.Fragment == "" {
			return u.Host
		}
	}
	return ""
}

// HasStratumURI reports whether cert carries any stratum:// URI SAN; a node
// leaf must not.
func HasStratumURI(cert *x509.Certificate) bool {
	for _, u := range cert.URIs {
		if strings.EqualFold(u.Scheme, founderURIScheme) {
			return true
		}
	}
	return false
}

// FounderTrustError is a server that is not the pinned cluster's founder.
// Waiting does not make it one: callers never retry it.
type FounderTrustError struct {
	Want   string // the CA pin asked for
	Reason string // names the certificate and what is wrong with it
}

func (e *FounderTrustError) Error() string { return e.Reason }

// IsFounderLeaf reports whether cert (already verified against the
// cluster CA) is one the founder issued to itself: it carries the
// stratum://<clusterId>/founder URI SAN, which no node leaf carries.
func IsFounderLeaf(cert *x509.Certificate, clusterID string) bool {
	got := founderClusterOf(cert)
	return got != "" && got == clusterID
}

// VerifyFounder checks a server's chain (leaf first, as sent): it must hold
// a CA certificate whose SPKI pin is pin, the leaf must verify up to that CA
// for server auth at now, and the leaf must carry the founder URI SAN (of
// clusterID when given; of any cluster otherwise: a new joiner knows only
// the pin, and the pin already names the cluster's CA).
func VerifyFounder(chain []*x509.Certificate, pin, clusterID string, now time.Time) error {
	pin = strings.ToLower(pin)
	fail := func(reason string) error { return &FounderTrustError{Want: pin, Reason: reason} }
	if len(chain) == 0 {
		return fail("the server presented no certificate")
	}
	var anchor *x509.Certificate
	var seen []string
	for _, c := range chain {
		p := SPKIPin(c)
		if p == pin && c.IsCA {
			anchor = c
			break
		}
		if c.IsCA {
			seen = append(seen, p)
		}
	}
	if anchor == nil {
		// The presented CA's pin is not named: an operator in a hurry
		// would paste it as --ca-pin, and the pin would then trust
		// whoever answered first.
		if len(seen) > 0 {
			return fail("the CA it presented has another pin than the one expected")
		}
		return fail("it presented no CA certificate")
	}
	roots := x509.NewCertPool()
	roots.AddCert(anchor)
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			return fail("its certificate is outside its validity period (check this machine's clock): " + err.Error())
		}
		return fail("its certificate does not verify against the pinned CA: " + err.Error())
	}
	got := founderClusterOf(leaf)
	name := "certificate " + strings.TrimSpace("CN="+leaf.Subject.CommonName) + " serial " + leaf.SerialNumber.Text(16)
	switch {
	case got == "":
		return fail(name + " is issued by the cluster CA but is not the founder's (no " + founderURIScheme + "://<clusterId>/founder URI SAN): a member's certificate, not the founder")
	case clusterID != "" && got != clusterID:
		return fail(name + " is the founder certificate of cluster " + got + ", not of " + clusterID)
	}
	return nil
}
