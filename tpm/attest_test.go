package tpm

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"stratum/attest"
	"stratum/wire"
)

// TestAttestationOnSimulator runs the joiner's side against the founder's
// checks on the reference TPM, and checks no handle is left loaded.
func TestAttestationOnSimulator(t *testing.T) {
	_, tp := openSim(t)
	c, err := attestationClaim(tp)
	if err != nil {
		t.Fatalf("attestationClaim: %v", err)
	}
	assertNoHandles(t, tp)
	if len(c.EKCert) != 0 {
		t.Errorf("the simulator has no EK certificate, got %d bytes", len(c.EKCert))
	}
	again, err := attestationClaim(tp)
	if err != nil || string(again.EKPublic) != string(c.EKPublic) || string(again.AKPublic) != string(c.AKPublic) {
		t.Fatalf("a second claim differs from the first (%v): the keys must be derived again, not made anew", err)
	}
	wc := wire.AttestationClaim{EKPublic: c.EKPublic, AKPublic: c.AKPublic}
	ev, err := attest.CheckClaim(wc, nil, time.Now())
	if err != nil {
		t.Fatalf("CheckClaim: %v", err)
	}
	ch, err := attest.NewChallenge(rand.Reader, ev)
	if err != nil {
		t.Fatal(err)
	}
	const pin = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	p, err := answer(tp, c, ch.CredentialBlob, ch.EncryptedSecret, attest.QualifyingData(ch.Nonce, pin))
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	assertNoHandles(t, tp)
	if err := attest.VerifyProof(wc, ch, wire.AttestationProof{Secret: p.Secret, Quote: p.Quote, Signature: p.Signature}, pin); err != nil {
		t.Fatalf("VerifyProof: %v", err)
	}

	// A claim that is not this TPM's is refused before the TPM is asked.
	other := c
	other.AKPublic = c.EKPublic
	_, err = answer(tp, other, ch.CredentialBlob, ch.EncryptedSecret, nil)
	if err == nil || !strings.Contains(err.Error(), "not the one claimed") {
		t.Fatalf("answer for another claim = %v", err)
	}
	assertNoHandles(t, tp)
}
