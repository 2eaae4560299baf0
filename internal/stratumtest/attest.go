package stratumtest

import (
	"net/url"
	"testing"

	"stratum/attest"
	"stratum/tpm"
	"stratum/wire"
)

// TPM attestation verbs (issue 33): what a joiner's TPM claims and
// answers, for tests that play a joiner, or an attacker, over the API.

// TPMClaim is the attestation claim of the TPM at sock (a socket TPM from
// tpmtest), as the joiner's TPM code and as the registration carries it.
func TPMClaim(t testing.TB, sock string) (tpm.Claim, *wire.AttestationClaim) {
	t.Helper()
	c, err := tpm.AttestationClaim(sock)
	if err != nil {
		t.Fatalf("TPM claim of %s: %v", sock, err)
	}
	return c, &wire.AttestationClaim{EKCert: c.EKCert, EKPublic: c.EKPublic, AKPublic: c.AKPublic}
}

// AnswerChallenge is what the TPM at sock answers to ch for claim, its
// quote bound to the registration key pin.
func AnswerChallenge(t testing.TB, sock string, claim tpm.Claim, ch *wire.AttestationChallenge, pin string) wire.AttestationProof {
	t.Helper()
	if ch == nil {
		t.Fatal("no attestation challenge to answer")
	}
	p, err := tpm.Answer(sock, claim, ch.CredentialBlob, ch.EncryptedSecret, attest.QualifyingData(ch.Nonce, pin))
	if err != nil {
		t.Fatalf("TPM answer: %v", err)
	}
	return wire.AttestationProof{Secret: p.Secret, Quote: p.Quote, Signature: p.Signature}
}

// Attest posts proof for joinID as the joiner c and returns the status,
// the error code (empty on success) and the joiner's view.
func (c *Client) Attest(t testing.TB, joinID string, proof wire.AttestationProof) (status int, code string, v wire.JoinerView) {
	t.Helper()
	status, aerr, err := c.Do("POST", "/v1/join/registrations/"+url.PathEscape(joinID)+"/attestation", proof, &v)
	if err != nil {
		t.Fatal(err)
	}
	if aerr != nil {
		code = string(aerr.Code)
	}
	return status, code, v
}
