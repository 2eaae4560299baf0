package attest_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"stratum/attest"
	"stratum/tpm"
	"stratum/tpm/tpmtest"
	"stratum/wire"
)

const (
	pinA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	pinB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// rack is two machines of one manufacturer and one TPM without an EK
// certificate. swtpm_setup takes about a second per TPM, so one rack
// serves all the subtests of TestAttestationOnSwtpm.
type rack struct {
	pool           *attest.Pool
	a, b, plain    string // TPM sockets
	claimA, claimB wire.AttestationClaim
	claimPlain     wire.AttestationClaim
}

func newRack(t *testing.T) *rack {
	t.Helper()
	m := tpmtest.NewManufacturer(t)
	r := &rack{a: tpmtest.StartSwtpmWithEK(t, m), b: tpmtest.StartSwtpmWithEK(t, m), plain: tpmtest.StartSwtpm(t)}
	pool, err := attest.ParsePool(m.CABundle(t))
	if err != nil {
		t.Fatalf("ParsePool: %v", err)
	}
	r.pool = pool
	r.claimA, r.claimB, r.claimPlain = claimOf(t, r.a), claimOf(t, r.b), claimOf(t, r.plain)
	return r
}

func claimOf(t *testing.T, sock string) wire.AttestationClaim {
	t.Helper()
	c, err := tpm.AttestationClaim(sock)
	if err != nil {
		t.Fatalf("AttestationClaim: %v", err)
	}
	return wire.AttestationClaim{EKCert: c.EKCert, EKPublic: c.EKPublic, AKPublic: c.AKPublic}
}

func TestAttestationOnSwtpm(t *testing.T) {
	r := newRack(t)
	t.Run("claims", func(t *testing.T) { testClaims(t, r) })
	t.Run("proofs", func(t *testing.T) { testProofs(t, r) })
}

func testClaims(t *testing.T, r *rack) {
	now := time.Now()
	otherPool := selfSignedPool(t)
	withAK := func(c wire.AttestationClaim, edit func(*tpm2.TPMTPublic)) wire.AttestationClaim {
		pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](c.AKPublic)
		if err != nil {
			t.Fatal(err)
		}
		edit(pub)
		c.AKPublic = tpm2.Marshal(pub)
		return c
	}
	mixed := r.claimA
	mixed.EKCert = r.claimB.EKCert
	akAsEK := r.claimA
	akAsEK.EKPublic = r.claimA.AKPublic
	padded := r.claimA
	padded.EKCert = append(bytes.Clone(r.claimA.EKCert), make([]byte, 100)...)
	trailing := r.claimA
	trailing.AKPublic = append(bytes.Clone(r.claimA.AKPublic), 0)

	for _, tc := range []struct {
		name      string
		claim     wire.AttestationClaim
		pool      *attest.Pool
		wantErr   string
		wantChain string
	}{
		{name: "good claim, chain to the pool", claim: r.claimA, pool: r.pool, wantChain: attest.ChainVerified},
		{name: "padded NV certificate", claim: padded, pool: r.pool, wantChain: attest.ChainVerified},
		{name: "no pool configured", claim: r.claimA, wantChain: attest.ChainNone},
		{name: "chain to another pool", claim: r.claimA, pool: otherPool, wantChain: attest.ChainNone},
		{name: "no EK certificate", claim: r.claimPlain, pool: r.pool, wantChain: attest.ChainNone},
		{name: "certificate of another machine's EK", claim: mixed, pool: r.pool, wantErr: "does not certify ekPublic"},
		{name: "AK without restricted", claim: withAK(r.claimA, func(p *tpm2.TPMTPublic) { p.ObjectAttributes.Restricted = false }), wantErr: "restricted signing"},
		{name: "AK without fixedTPM", claim: withAK(r.claimA, func(p *tpm2.TPMTPublic) { p.ObjectAttributes.FixedTPM = false }), wantErr: "fixedTPM"},
		{name: "AK without fixedParent", claim: withAK(r.claimA, func(p *tpm2.TPMTPublic) { p.ObjectAttributes.FixedParent = false }), wantErr: "fixedParent"},
		{name: "AK imported", claim: withAK(r.claimA, func(p *tpm2.TPMTPublic) { p.ObjectAttributes.SensitiveDataOrigin = false }), wantErr: "sensitiveDataOrigin"},
		{name: "AK that decrypts", claim: withAK(r.claimA, func(p *tpm2.TPMTPublic) { p.ObjectAttributes.Decrypt = true }), wantErr: "restricted signing"},
		{name: "the AK as EK", claim: akAsEK, wantErr: "not an endorsement key"},
		{name: "bytes after the AK", claim: trailing, wantErr: "after the TPMT_PUBLIC"},
		{name: "no AK", claim: wire.AttestationClaim{EKPublic: r.claimA.EKPublic}, wantErr: "akPublic: required"},
		{name: "garbage EK", claim: wire.AttestationClaim{EKPublic: []byte{1, 2, 3}, AKPublic: r.claimA.AKPublic}, wantErr: "ekPublic: not a TPMT_PUBLIC"},
		{name: "garbage certificate", claim: wire.AttestationClaim{EKCert: []byte("not DER"), EKPublic: r.claimA.EKPublic, AKPublic: r.claimA.AKPublic}, wantErr: "ekCert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := attest.CheckClaim(tc.claim, tc.pool, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("CheckClaim error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckClaim: %v", err)
			}
			if ev.EKChain != tc.wantChain {
				t.Errorf("EKChain = %q (%s), want %q", ev.EKChain, ev.ChainProblem, tc.wantChain)
			}
			if ev.EKChain == attest.ChainNone && ev.ChainProblem == "" {
				t.Error("no reason given for an unverified chain")
			}
			if len(tc.claim.EKCert) > 0 {
				cert, err := x509.ParseCertificate(r.claimA.EKCert)
				if err != nil {
					t.Fatal(err)
				}
				if want := hexSum(cert.RawSubjectPublicKeyInfo); ev.EKSHA256 != want {
					t.Errorf("EKSHA256 = %s, want the certificate's SPKI hash %s", ev.EKSHA256, want)
				}
				if want := hexSum(cert.Raw); ev.EKCertSHA256 != want {
					t.Errorf("EKCertSHA256 = %s, want %s", ev.EKCertSHA256, want)
				}
			} else if ev.EKCertSHA256 != "" || len(ev.EKSHA256) != 64 {
				t.Errorf("without a certificate: EKSHA256 %q, EKCertSHA256 %q", ev.EKSHA256, ev.EKCertSHA256)
			}
		})
	}
}

func testProofs(t *testing.T, r *rack) {
	evA := mustCheck(t, r.claimA, r.pool)
	evPlain := mustCheck(t, r.claimPlain, nil)
	// answered is a proof made by the machine's own TPM for ch and pin.
	answered := func(sock string, c wire.AttestationClaim, ch attest.Challenge, pin string) wire.AttestationProof {
		t.Helper()
		p, err := tpm.Answer(sock, tpm.Claim{EKCert: c.EKCert, EKPublic: c.EKPublic, AKPublic: c.AKPublic},
			ch.CredentialBlob, ch.EncryptedSecret, attest.QualifyingData(ch.Nonce, pin))
		if err != nil {
			t.Fatalf("tpm.Answer: %v", err)
		}
		return wire.AttestationProof{Secret: p.Secret, Quote: p.Quote, Signature: p.Signature}
	}
	ch1, ch2 := mustChallenge(t, evA), mustChallenge(t, evA)
	good := answered(r.a, r.claimA, ch1, pinA)
	forB := answered(r.a, r.claimA, ch1, pinB)
	second := answered(r.a, r.claimA, ch2, pinA)
	replayed := second
	replayed.Quote, replayed.Signature = good.Quote, good.Signature
	wrongSecret := good
	wrongSecret.Secret = bytes.Repeat([]byte{7}, attest.SecretSize)
	forged := good
	forged.Quote = bytes.Clone(good.Quote)
	forged.Quote[len(forged.Quote)-1] ^= 1
	chPlain := mustChallenge(t, evPlain)

	for _, tc := range []struct {
		name    string
		claim   wire.AttestationClaim
		ch      attest.Challenge
		proof   wire.AttestationProof
		pin     string
		wantErr string
	}{
		{name: "good proof", claim: r.claimA, ch: ch1, proof: good, pin: pinA},
		{name: "good proof, second challenge", claim: r.claimA, ch: ch2, proof: second, pin: pinA},
		{name: "TPM without a certificate", claim: r.claimPlain, ch: chPlain, proof: answered(r.plain, r.claimPlain, chPlain, pinA), pin: pinA},
		{name: "replayed quote for a new nonce", claim: r.claimA, ch: ch2, proof: replayed, pin: pinA, wantErr: "another challenge"},
		{name: "quote for another key pin", claim: r.claimA, ch: ch1, proof: forB, pin: pinA, wantErr: "another registration key"},
		{name: "wrong secret", claim: r.claimA, ch: ch1, proof: wrongSecret, pin: pinA, wantErr: "does not answer the credential challenge"},
		{name: "secret of another challenge", claim: r.claimA, ch: ch2, proof: good, pin: pinA, wantErr: "does not answer the credential challenge"},
		{name: "quote altered", claim: r.claimA, ch: ch1, proof: forged, pin: pinA, wantErr: "signature does not verify"},
		{name: "quote signed by another AK", claim: r.claimB, ch: ch1, proof: good, pin: pinA, wantErr: "signature does not verify"},
		{name: "signature as quote", claim: r.claimA, ch: ch1, proof: wire.AttestationProof{Secret: good.Secret, Quote: good.Signature, Signature: good.Signature}, pin: pinA, wantErr: "quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := attest.VerifyProof(tc.claim, tc.ch, tc.proof, tc.pin)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("VerifyProof: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("VerifyProof error = %v, want one saying %q", err, tc.wantErr)
			}
		})
	}

	// Another machine's TPM cannot open a challenge made for A's EK, even
	// with A's public claim in hand.
	t.Run("another TPM cannot answer", func(t *testing.T) {
		ch := mustChallenge(t, evA)
		_, err := tpm.Answer(r.b, tpm.Claim{EKCert: r.claimA.EKCert, EKPublic: r.claimA.EKPublic, AKPublic: r.claimB.AKPublic},
			ch.CredentialBlob, ch.EncryptedSecret, attest.QualifyingData(ch.Nonce, pinA))
		if err == nil {
			t.Fatal("TPM B answered a challenge for TPM A's EK")
		}
		t.Log(err)
	})
}

func TestProofProblems(t *testing.T) {
	ok := wire.AttestationProof{Secret: make([]byte, 32), Quote: make([]byte, 100), Signature: make([]byte, 70)}
	if f := attest.ProofProblems(ok); len(f) != 0 {
		t.Errorf("ProofProblems(ok) = %v", f)
	}
	f := attest.ProofProblems(wire.AttestationProof{Secret: make([]byte, 33), Signature: make([]byte, 5000)})
	if len(f) != 3 {
		t.Fatalf("ProofProblems = %v, want secret, quote and signature", f)
	}
}

func TestQualifyingDataSeparates(t *testing.T) {
	n := []byte("nonce")
	base := attest.QualifyingData(n, pinA)
	for name, other := range map[string][]byte{
		"another pin":   attest.QualifyingData(n, pinB),
		"another nonce": attest.QualifyingData([]byte("nonce2"), pinA),
		"shifted":       attest.QualifyingData([]byte("nonces"), pinA[1:]),
	} {
		if bytes.Equal(base, other) {
			t.Errorf("%s gives the same qualifying data", name)
		}
	}
	if len(base) != sha256.Size {
		t.Errorf("qualifying data is %d bytes", len(base))
	}
}

func TestParsePool(t *testing.T) {
	root, _ := selfSigned(t, true)
	leaf, _ := selfSigned(t, false)
	for name, tc := range map[string]struct {
		pem     []byte
		wantErr string
	}{
		"root":        {pem: root},
		"empty":       {pem: nil, wantErr: "no CERTIFICATE"},
		"not a CA":    {pem: leaf, wantErr: "not a CA"},
		"a key block": {pem: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), wantErr: "want CERTIFICATE"},
		"trailing":    {pem: append(bytes.Clone(root), "junk"...), wantErr: "trailing"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := attest.ParsePool(tc.pem)
			if tc.wantErr == "" {
				if err != nil || p.Len() != 1 {
					t.Fatalf("ParsePool = %v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParsePool error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func mustCheck(t *testing.T, c wire.AttestationClaim, pool *attest.Pool) attest.Evidence {
	t.Helper()
	ev, err := attest.CheckClaim(c, pool, time.Now())
	if err != nil {
		t.Fatalf("CheckClaim: %v", err)
	}
	return ev
}

func mustChallenge(t *testing.T, ev attest.Evidence) attest.Challenge {
	t.Helper()
	ch, err := attest.NewChallenge(rand.Reader, ev)
	if err != nil {
		t.Fatalf("NewChallenge: %v", err)
	}
	if len(ch.SecretSHA256) != sha256.Size || len(ch.Nonce) != attest.NonceSize {
		t.Fatalf("challenge: %d-byte secret hash, %d-byte nonce", len(ch.SecretSHA256), len(ch.Nonce))
	}
	return ch
}

func selfSignedPool(t *testing.T) *attest.Pool {
	root, _ := selfSigned(t, true)
	p, err := attest.ParsePool(root)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func selfSigned(t *testing.T, ca bool) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another manufacturer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: ca, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
