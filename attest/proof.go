package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math/big"

	"github.com/google/go-tpm/tpm2"

	"stratum/apierr"
	"stratum/wire"
)

// qualifyingLabel separates this use of an AK's quote from any other the
// same key might be put to.
const qualifyingLabel = "stratum join attestation v1\x00"

// QualifyingData is the quote's extraData for a challenge: SHA-256 over
// the label, the challenge's nonce and the registration's key pin
// ("sha256:<hex>"). It ties the TPM's answer to this challenge and to the
// key the registration is pinned to: a quote made for another nonce or
// another key never matches.
func QualifyingData(nonce []byte, keyPin string) []byte {
	h := sha256.New()
	h.Write([]byte(qualifyingLabel))
	h.Write([]byte{byte(len(nonce) >> 8), byte(len(nonce))})
	h.Write(nonce)
	h.Write([]byte(keyPin))
	return h.Sum(nil)
}

// Size limits of a proof's parts.
const (
	maxQuote     = 4 << 10
	maxSignature = 1 << 10
)

// ProofProblems lists what makes a proof malformed (missing or oversized
// parts): such a request is refused without spending the challenge.
func ProofProblems(p wire.AttestationProof) apierr.Fields {
	var f apierr.Fields
	for _, part := range []struct {
		field string
		b     []byte
		max   int
	}{{"secret", p.Secret, SecretSize}, {"quote", p.Quote, maxQuote}, {"signature", p.Signature, maxSignature}} {
		switch {
		case len(part.b) == 0:
			f.Add(part.field, "required")
		case len(part.b) > part.max:
			f.Add(part.field, "larger than %d bytes", part.max)
		}
	}
	return f
}

// VerifyProof checks a joiner's answer to ch for the claim's AK and the
// registration's key pin: the recovered secret (compared as a hash, in
// constant time), then a TPM-made quote signed by the AK whose extraData
// is QualifyingData(ch.Nonce, keyPin). The caller spends the challenge
// whatever the outcome, so each nonce is answered once. The error is the
// reason shown on the registration.
func VerifyProof(c wire.AttestationClaim, ch Challenge, p wire.AttestationProof, keyPin string) error {
	ak, err := parsePublic("akPublic", c.AKPublic)
	if err != nil {
		return err
	}
	if err := checkAK(ak); err != nil {
		return fmt.Errorf("akPublic: %w", err)
	}
	got := sha256.Sum256(p.Secret)
	if len(ch.SecretSHA256) != sha256.Size || subtle.ConstantTimeCompare(got[:], ch.SecretSHA256) != 1 {
		return errors.New("the secret does not answer the credential challenge: this TPM does not hold the claimed EK, or the AK is not on it")
	}
	attest, err := tpm2.Unmarshal[tpm2.TPMSAttest](p.Quote)
	if err != nil {
		return fmt.Errorf("the quote is not a TPMS_ATTEST: %v", err)
	}
	if err := attest.Magic.Check(); err != nil {
		return fmt.Errorf("the quote was not made by a TPM: %v", err)
	}
	if attest.Type != tpm2.TPMSTAttestQuote {
		return fmt.Errorf("the attestation is of type 0x%x, not a quote", uint16(attest.Type))
	}
	if err := verifySignature(ak, p.Quote, p.Signature); err != nil {
		return err
	}
	want := QualifyingData(ch.Nonce, keyPin)
	if !bytes.Equal(attest.ExtraData.Buffer, want) {
		return errors.New("the quote is for another challenge or another registration key (its qualifying data differs)")
	}
	return nil
}

// verifySignature checks sigBytes, a TPMT_SIGNATURE, over msg with the
// AK's own scheme.
func verifySignature(ak *tpm2.TPMTPublic, msg, sigBytes []byte) error {
	scheme, err := akScheme(ak)
	if err != nil {
		return err
	}
	sig, err := tpm2.Unmarshal[tpm2.TPMTSignature](sigBytes)
	if err != nil {
		return fmt.Errorf("the quote's signature is not a TPMT_SIGNATURE: %v", err)
	}
	if sig.SigAlg != scheme {
		return fmt.Errorf("the quote is signed with scheme 0x%x, not the attestation key's", uint16(sig.SigAlg))
	}
	key, err := tpm2.Pub(*ak)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(msg)
	bad := errors.New("the quote's signature does not verify with the attestation key")
	switch scheme {
	case tpm2.TPMAlgRSASSA:
		s, err := sig.Signature.RSASSA()
		if err != nil || s.Hash != tpm2.TPMAlgSHA256 {
			return bad
		}
		pub, ok := key.(*rsa.PublicKey)
		if !ok || rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], s.Sig.Buffer) != nil {
			return bad
		}
	case tpm2.TPMAlgECDSA:
		s, err := sig.Signature.ECDSA()
		if err != nil || s.Hash != tpm2.TPMAlgSHA256 {
			return bad
		}
		pub, ok := key.(*ecdsa.PublicKey)
		r, ss := new(big.Int).SetBytes(s.SignatureR.Buffer), new(big.Int).SetBytes(s.SignatureS.Buffer)
		if !ok || !ecdsa.Verify(pub, digest[:], r, ss) {
			return bad
		}
	default:
		return bad
	}
	return nil
}
