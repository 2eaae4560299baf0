package crypto

import (
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestVerifyFounderRequiresFounderSAN(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("cl-aaaa1111", now)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewCA("cl-bbbb2222", now)
	issue := func(c *CA, uris ...*url.URL) *x509.Certificate {
		l, err := c.Issue(LeafRequest{CommonName: "x", URIs: uris, Server: true, Client: true, Validity: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		return l.Cert
	}
	cases := []struct {
		name    string
		chain   []*x509.Certificate
		cluster string
		refuse  string // substring of the reason; "" = accepted
	}{
		{"founder leaf, any cluster", []*x509.Certificate{issue(ca, FounderURI("cl-aaaa1111")), ca.Cert}, "", ""},
		{"founder leaf, its cluster", []*x509.Certificate{issue(ca, FounderURI("cl-aaaa1111")), ca.Cert}, "cl-aaaa1111", ""},
		{"member leaf (no SAN) is not the founder", []*x509.Certificate{issue(ca), ca.Cert}, "", "not the founder"},
		{"founder SAN of another cluster", []*x509.Certificate{issue(ca, FounderURI("cl-zzzz9999")), ca.Cert}, "cl-aaaa1111", "cl-zzzz9999"},
		{"other CA with the SAN", []*x509.Certificate{issue(other, FounderURI("cl-aaaa1111")), other.Cert}, "", "another pin"},
		{"pinned CA beside a rogue leaf", []*x509.Certificate{issue(other, FounderURI("cl-aaaa1111")), ca.Cert}, "", "does not verify"},
		{"no certificate", nil, "", "no certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyFounder(c.chain, ca.Pin(), c.cluster, now)
			if c.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *FounderTrustError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.refuse) {
				t.Fatalf("want a refusal naming %q, got %v", c.refuse, err)
			}
		})
	}
	if HasStratumURI(issue(ca)) || !HasStratumURI(issue(ca, FounderURI("cl-aaaa1111"))) {
		t.Fatal("HasStratumURI misreads the SAN")
	}
}
