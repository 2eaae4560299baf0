package attest_test

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/attest"
	"stratum/wire"
)

// The fixture is the public claim of a swtpm manufactured with
// swtpm_setup --create-ek-cert, and its manufacturer's root and issuing
// CA: it lets the checks run without a TPM, and seeds the fuzz targets.
var fixtureTime = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

func fixture(t testing.TB) (wire.AttestationClaim, *attest.Pool) {
	t.Helper()
	b, err := os.ReadFile("testdata/swtpm-claim.json")
	if err != nil {
		t.Fatal(err)
	}
	var c wire.AttestationClaim
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	pool, err := attest.LoadPool("testdata/swtpm-ek-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	return c, pool
}

func TestCheckClaimFixture(t *testing.T) {
	c, pool := fixture(t)
	ev, err := attest.CheckClaim(c, pool, fixtureTime)
	if err != nil || ev.EKChain != attest.ChainVerified {
		t.Fatalf("CheckClaim = %+v, %v", ev, err)
	}
	// Before the manufacturer's CA existed, the chain does not hold.
	ev, err = attest.CheckClaim(c, pool, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || ev.EKChain != attest.ChainNone || ev.ChainProblem == "" {
		t.Fatalf("CheckClaim in 2020 = %+v, %v", ev, err)
	}
}

func FuzzCheckClaim(f *testing.F) {
	c, pool := fixture(f)
	f.Add(c.EKCert, c.EKPublic, c.AKPublic)
	f.Add([]byte{}, c.EKPublic, c.AKPublic)
	f.Add(c.EKCert, c.AKPublic, c.EKPublic)
	f.Fuzz(func(t *testing.T, cert, ek, ak []byte) {
		ev, err := attest.CheckClaim(wire.AttestationClaim{EKCert: cert, EKPublic: ek, AKPublic: ak}, pool, fixtureTime)
		if err != nil {
			return
		}
		if len(ev.EKSHA256) != 64 || ev.AKName == "" || (ev.EKChain != attest.ChainVerified && ev.EKChain != attest.ChainNone) {
			t.Fatalf("accepted claim with evidence %+v", ev)
		}
		if _, err := attest.NewChallenge(rand.Reader, ev); err != nil {
			t.Fatalf("an accepted claim cannot be challenged: %v", err)
		}
	})
}

// FuzzVerifyProof: no input verifies without the TPM, and none panics.
func FuzzVerifyProof(f *testing.F) {
	c, pool := fixture(f)
	ev, err := attest.CheckClaim(c, pool, fixtureTime)
	if err != nil {
		f.Fatal(err)
	}
	ch, err := attest.NewChallenge(rand.Reader, ev)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(make([]byte, 32), []byte("\xffTCG\x80\x18"), []byte{0, 0x18, 0, 0x0b})
	f.Add([]byte{1}, c.AKPublic, c.EKPublic)
	f.Fuzz(func(t *testing.T, secret, quote, sig []byte) {
		if err := attest.VerifyProof(c, ch, wire.AttestationProof{Secret: secret, Quote: quote, Signature: sig}, "sha256:00"); err == nil {
			t.Fatal("a proof made without the TPM verified")
		}
	})
}

// LoadPool takes the root and the issuing CA from separate files, as
// swtpm's local CA keeps them; the issuer alone is no pool.
func TestLoadPoolFiles(t *testing.T) {
	c, _ := fixture(t)
	b, err := os.ReadFile("testdata/swtpm-ek-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.SplitAfter(string(b), "-----END CERTIFICATE-----\n")
	dir := t.TempDir()
	root, issuer := filepath.Join(dir, "root.pem"), filepath.Join(dir, "issuer.pem")
	if err := os.WriteFile(root, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(issuer, []byte(blocks[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := attest.LoadPool(root, issuer)
	if err != nil || pool.Len() != 2 {
		t.Fatalf("LoadPool(root, issuer) = %v, %v", pool, err)
	}
	if ev, err := attest.CheckClaim(c, pool, fixtureTime); err != nil || ev.EKChain != attest.ChainVerified {
		t.Fatalf("CheckClaim with the two files = %+v, %v", ev, err)
	}
	if _, err := attest.LoadPool(issuer); err == nil || !strings.Contains(err.Error(), "no self-signed root") {
		t.Fatalf("LoadPool(issuer) = %v, want no root", err)
	}
	if _, err := attest.LoadPool(filepath.Join(dir, "missing.pem")); err == nil {
		t.Fatal("LoadPool of a missing file succeeded")
	}
}
