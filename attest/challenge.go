package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/google/go-tpm/tpm2"

	"stratum/wire"
)

// Sizes of a challenge's fresh values: the secret fills a SHA-256 digest
// (the most TPM2_MakeCredential carries for a SHA-256 named EK).
const (
	SecretSize = 32
	NonceSize  = 32
)

// Challenge is a credential challenge as the founder keeps it: what the
// joiner is shown, and only a hash of the secret it must recover.
type Challenge struct {
	wire.AttestationChallenge
	// SecretSHA256 is SHA-256 of the secret; the secret itself is kept
	// nowhere, so a store read does not answer the challenge.
	SecretSHA256 []byte
}

// NewChallenge encrypts a fresh random secret to the claim's EK for its
// AK (go-tpm's CreateCredential, the software TPM2_MakeCredential) and
// draws a fresh nonce for the quote.
func NewChallenge(random io.Reader, ev Evidence) (Challenge, error) {
	secret := make([]byte, SecretSize)
	nonce := make([]byte, NonceSize)
	if _, err := io.ReadFull(random, secret); err != nil {
		return Challenge{}, fmt.Errorf("attestation secret: %w", err)
	}
	if _, err := io.ReadFull(random, nonce); err != nil {
		return Challenge{}, fmt.Errorf("attestation nonce: %w", err)
	}
	key, err := tpm2.ImportEncapsulationKey(&ev.ek)
	if err != nil {
		return Challenge{}, fmt.Errorf("credential challenge: %w", err)
	}
	name, err := hex.DecodeString(ev.AKName)
	if err != nil {
		return Challenge{}, fmt.Errorf("credential challenge: AK name: %w", err)
	}
	blob, encSecret, err := tpm2.CreateCredential(random, key, name, secret)
	if err != nil {
		return Challenge{}, fmt.Errorf("credential challenge: %w", err)
	}
	sum := sha256.Sum256(secret)
	return Challenge{
		AttestationChallenge: wire.AttestationChallenge{CredentialBlob: blob, EncryptedSecret: encSecret, Nonce: nonce},
		SecretSHA256:         sum[:],
	}, nil
}
