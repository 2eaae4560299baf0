package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"reflect"
	"strconv"
	"testing"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/crypto"
)

func p256Key(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func publicPEM(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// TestRenewNodeLeaf: a vouched member presenting its current leaf gets a
// new one for its key, naming what the first named, recorded as its next
// leaf and audited; the old leaf counts until the new one is first used,
// which promotes it and ends the old one. A renewal asked again before
// that replaces the unused leaf. Another node's leaf, an old leaf, a
// removed or still-delivering member and a key that is not P-256 are
// refused, and a refusal changes nothing.
func TestRenewNodeLeaf(t *testing.T) {
	bao := newFakeBao()
	bao.root = false
	e := newEnv(t, func(c *Config) { c.OpenBao = bao })
	_, a := e.joinFully("a", 1)
	_, b := e.joinFully("b", 2)
	e.applied(a)
	cv := e.pending("c")
	e.approve(cv.JoinID, assignment(3)) // c is delivering: not vouched yet
	e.svc.openBaoWork(context.Background())
	leaves := cluster.NodeLeaves{DB: e.db}

	ma, _ := e.member(a)
	s0 := ma.LeafSerial
	if s0 == "" {
		t.Fatal("a has no leaf serial")
	}
	k1 := p256Key(t)
	before := e.auditCount()
	l1, err := e.svc.RenewNodeLeaf(a, s0, &k1.PublicKey)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	c1, err := crypto.ParseCertPEM([]byte(l1.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	s1 := c1.SerialNumber.Text(16)
	switch {
	case c1.Subject.CommonName != a || !reflect.DeepEqual(c1.DNSNames, []string{a}) || len(c1.IPAddresses) != 1 || !c1.IPAddresses[0].Equal(net.ParseIP(ma.MgmtIP)) || len(c1.URIs) != 0:
		t.Errorf("names: CN %s DNS %v IP %v URI %v, want %s and %s", c1.Subject.CommonName, c1.DNSNames, c1.IPAddresses, c1.URIs, a, ma.MgmtIP)
	case !reflect.DeepEqual(c1.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}):
		t.Errorf("usage %v", c1.ExtKeyUsage)
	case !c1.PublicKey.(*ecdsa.PublicKey).Equal(&k1.PublicKey):
		t.Error("the leaf does not certify the key sent")
	case !c1.NotAfter.Equal(l1.NotAfter) || c1.NotAfter.Sub(e.clock.Now()) != leafValidity:
		t.Errorf("notAfter %v (answered %v), want now + %v", c1.NotAfter, l1.NotAfter, leafValidity)
	}
	if _, err := c1.Verify(x509.VerifyOptions{Roots: e.ca.Pool(), CurrentTime: e.clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the new leaf does not chain to the cluster CA: %v", err)
	}
	if n := e.auditCount(); n != before+1 {
		t.Errorf("audit events %d, want %d (cluster.node.leaf.renewed)", n, before+1)
	}
	if m, _ := e.member(a); m.LeafSerial != s0 || m.NextLeafSerial != s1 {
		t.Fatalf("after renewal: leaf %s next %s, want %s and %s", m.LeafSerial, m.NextLeafSerial, s0, s1)
	}
	// The old leaf still counts, and using it promotes nothing.
	if err := leaves.CheckNodeLeaf(a, s0); err != nil {
		t.Fatalf("the old leaf before promotion: %v", err)
	}
	if m, _ := e.member(a); m.LeafSerial != s0 || m.NextLeafSerial != s1 {
		t.Fatalf("the old leaf changed the record: %+v", m)
	}
	// Renewed again before the new leaf was used: only the latest counts.
	k2 := p256Key(t)
	l2, err := e.svc.RenewNodeLeaf(a, s0, &k2.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := crypto.ParseCertPEM([]byte(l2.Certificate))
	s2 := c2.SerialNumber.Text(16)
	wantCode(t, leaves.CheckNodeLeaf(a, s1), apierr.Unauthenticated)
	// The first use of the new leaf promotes it (audited); the old one ends.
	before = e.auditCount()
	if err := leaves.CheckNodeLeaf(a, s2); err != nil {
		t.Fatalf("the new leaf: %v", err)
	}
	if m, _ := e.member(a); m.LeafSerial != s2 || m.NextLeafSerial != "" {
		t.Fatalf("after first use: leaf %s next %s, want %s and none", m.LeafSerial, m.NextLeafSerial, s2)
	}
	wantCode(t, leaves.CheckNodeLeaf(a, s0), apierr.Unauthenticated)
	if err := leaves.CheckNodeLeaf(a, s2); err != nil {
		t.Fatalf("the promoted leaf: %v", err)
	}
	if n := e.auditCount(); n != before+1 {
		t.Errorf("audit events %d after the promotion and more requests, want %d (one cluster.node.leaf.promoted)", n, before+1)
	}

	mb, _ := e.member(b)
	op, err := e.svc.Get(cv.JoinID)
	if err != nil || op.Assignment == nil {
		t.Fatalf("c: %+v %v", op, err)
	}
	mc, found := e.member(op.Assignment.NodeID)
	if !found || mc.LeafSerial == "" || mc.Vouched() {
		t.Fatalf("c's member: %+v", mc)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		name, node, serial string
		pub                *ecdsa.PublicKey
		code               apierr.Code
	}{
		{"another node's leaf", a, mb.LeafSerial, &k1.PublicKey, apierr.Unauthenticated},
		{"the leaf a promotion replaced", a, s0, &k1.PublicKey, apierr.Unauthenticated},
		{"the unused leaf a renewal replaced", a, s1, &k1.PublicKey, apierr.Unauthenticated},
		{"a member still delivering", mc.NodeID, mc.LeafSerial, &k1.PublicKey, apierr.Forbidden},
		{"a P-384 key", a, s2, &p384.PublicKey, apierr.InvalidInput},
		{"no key", a, s2, nil, apierr.InvalidInput},
		{"no such member", "n-nosuchnd", s2, &k1.PublicKey, apierr.Unauthenticated},
	}
	for _, r := range refusals {
		before, members := e.auditCount(), e.members()
		_, err := e.svc.RenewNodeLeaf(r.node, r.serial, r.pub)
		if ae, ok := apierr.As(err); !ok || ae.Code != r.code {
			t.Errorf("%s: %v, want %s", r.name, err, r.code)
		}
		if n := e.auditCount(); n != before || !reflect.DeepEqual(e.members(), members) {
			t.Errorf("%s: the refusal changed something (audit %d -> %d)", r.name, before, n)
		}
	}

	// A removed member's leaf renews nothing.
	if _, err := e.svc.RemoveMember(e.admin, b, "hardware gone"); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.RenewNodeLeaf(b, mb.LeafSerial, &k1.PublicKey)
	wantCode(t, err, apierr.Unauthenticated)
	if _, found := e.member(b); found {
		t.Error("a renewal brought a removed member back")
	}

	// The body: a PEM PKIX P-256 key and nothing else.
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	for i, body := range []string{
		`{}`, `{"publicKey":""}`, `{"publicKey":"AAAA"}`, `{"publicKey":` + strconv.Quote(string(publicPEM(t, ed))) + `}`,
		`{"publicKey":` + strconv.Quote(string(publicPEM(t, &p384.PublicKey))) + `}`,
		`{"publicKey":` + strconv.Quote(string(publicPEM(t, &k1.PublicKey))) + `,"x":1}`,
	} {
		if _, err := DecodeNodeLeafRenewal([]byte(body)); err == nil {
			t.Errorf("body %d accepted: %s", i, body)
		}
	}
	pub, err := DecodeNodeLeafRenewal([]byte(`{"publicKey":` + strconv.Quote(string(publicPEM(t, &k1.PublicKey))) + `}`))
	if err != nil || !pub.Equal(&k1.PublicKey) {
		t.Errorf("a P-256 key: %v", err)
	}
}
