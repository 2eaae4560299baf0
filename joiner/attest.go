package joiner

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"stratum/apierr"
	"stratum/attest"
	"stratum/tpm"
	"stratum/wire"
)

// tpmClaim is the attestation claim sent with the registration: this
// machine's EK (and its certificate) and an AK, from the TPM at --tpm.
// Without a TPM the registration carries none and a person approves it,
// as before zero-touch enrollment; a TPM that fails is said and treated
// the same way, since the claim only ever adds trust.
func (j *joiner) tpmClaim() *wire.AttestationClaim {
	c, err := tpm.AttestationClaim(j.cfg.TPMPath)
	switch {
	case errors.Is(err, tpm.ErrNoTPM):
		j.log.printf("no TPM at %s: registering without TPM attestation (an operator approves the join)", j.cfg.TPMPath)
		return nil
	case err != nil:
		j.log.printf("WARNING: the TPM at %s could not make an attestation claim (%v): registering without one (an operator approves the join)", j.cfg.TPMPath, err)
		return nil
	}
	j.claim = &c
	if len(c.EKCert) > 0 {
		j.log.printf("TPM attestation: presenting the TPM's endorsement key and its certificate")
	} else {
		j.log.printf("TPM attestation: presenting the TPM's endorsement key (the TPM holds no EK certificate)")
	}
	return &wire.AttestationClaim{EKCert: c.EKCert, EKPublic: c.EKPublic, AKPublic: c.AKPublic}
}

// answerChallenge answers the founder's attestation challenge when v
// shows one this run has not answered yet; it returns the view after the
// answer, or v. A challenge is answered once: a TPM that cannot answer it
// leaves the registration to a person, as the founder's view then says.
func (j *joiner) answerChallenge(ctx context.Context, v *view) (*view, error) {
	a := v.Attestation
	if a == nil || a.State != wire.AttestationChallenged || a.Challenge == nil {
		return v, nil
	}
	nonce := hex.EncodeToString(a.Challenge.Nonce)
	if j.answered[nonce] {
		return v, nil
	}
	j.answered[nonce] = true
	if j.claim == nil {
		// A registration picked up from the state dir: the keys are
		// derived again from the same TPM.
		c, err := tpm.AttestationClaim(j.cfg.TPMPath)
		if err != nil {
			j.log.printf("WARNING: cannot answer the TPM attestation challenge (%v): an operator approves the join", err)
			return v, nil
		}
		j.claim = &c
	}
	p, err := tpm.Answer(j.cfg.TPMPath, *j.claim, a.Challenge.CredentialBlob, a.Challenge.EncryptedSecret,
		attest.QualifyingData(a.Challenge.Nonce, j.id.Fingerprint))
	if err != nil {
		j.log.printf("WARNING: the TPM could not answer the attestation challenge (%v): an operator approves the join", err)
		return v, nil
	}
	var out view
	_, err = j.call(ctx, "answering the TPM attestation challenge", http.MethodPost, registrationPath(v.JoinID)+"/attestation",
		wire.AttestationProof{Secret: p.Secret, Quote: p.Quote, Signature: p.Signature}, &out, time.Minute)
	if e, ok := apierr.As(err); ok && e.Code == apierr.Conflict {
		// Answered already (a lost answer of an earlier try): the current
		// view says how it went.
		return j.get(ctx, v.JoinID, "", 0)
	}
	if err != nil {
		return nil, err
	}
	if out.Attestation != nil {
		switch out.Attestation.State {
		case wire.AttestationVerified:
			j.log.printf("TPM attestation verified (EK %s)", out.Attestation.EKSHA256)
		case wire.AttestationFailed:
			j.log.printf("TPM attestation refused: %s; an operator approves the join", orNone(out.Attestation.Reason))
		}
	}
	return &out, nil
}
