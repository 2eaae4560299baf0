package join

import (
	"crypto/rand"
	"time"

	"stratum/apierr"
	"stratum/attest"
	"stratum/strictjson"
	"stratum/wire"
)

// attestation is a registration's TPM attestation as stored: the claim
// and what its check established, the open challenge (only a hash of its
// secret) until it is answered, then the outcome.
type attestation struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`

	Claim        wire.AttestationClaim `json:"claim"`
	EKSHA256     string                `json:"ekSha256"`
	EKCertSHA256 string                `json:"ekCertSha256,omitempty"`
	EKChain      string                `json:"ekChain"`
	ChainProblem string                `json:"chainProblem,omitempty"`
	AKName       string                `json:"akName"`

	// Challenge and SecretSHA256 are cleared when the challenge is
	// answered, right or wrong: each nonce is answered once.
	Challenge    *wire.AttestationChallenge `json:"challenge,omitempty"`
	SecretSHA256 []byte                     `json:"secretSha256,omitempty"`

	InventoryNodeID string    `json:"inventoryNodeId,omitempty"`
	VerifiedAt      time.Time `json:"verifiedAt,omitzero"`
}

// claimed is a checked claim and its challenge, made before the
// registration's transaction (which may run more than once).
type claimed struct {
	claim     wire.AttestationClaim
	evidence  attest.Evidence
	challenge attest.Challenge
}

// checkClaim checks a registration's TPM claim; a bad one is the
// registration's INVALID_INPUT with the field attestation named.
func (s *Service) checkClaim(c *wire.AttestationClaim) (attest.Evidence, error) {
	ev, err := attest.CheckClaim(*c, s.cfg.EKPool, s.now())
	if err != nil {
		var f apierr.Fields
		f.Add("attestation", "%s", err.Error())
		return attest.Evidence{}, f.Err("the registration has problems")
	}
	return ev, nil
}

// challenge makes the credential challenge for a checked claim.
func (s *Service) challenge(c wire.AttestationClaim, ev attest.Evidence) (*claimed, error) {
	ch, err := attest.NewChallenge(rand.Reader, ev)
	if err != nil {
		return nil, err
	}
	return &claimed{claim: c, evidence: ev, challenge: ch}, nil
}

func (c *claimed) record() *attestation {
	ch := c.challenge.AttestationChallenge
	return &attestation{State: wire.AttestationChallenged, Claim: c.claim,
		EKSHA256: c.evidence.EKSHA256, EKCertSHA256: c.evidence.EKCertSHA256, EKChain: c.evidence.EKChain,
		ChainProblem: c.evidence.ChainProblem, AKName: c.evidence.AKName,
		Challenge: &ch, SecretSHA256: c.challenge.SecretSHA256}
}

// view is what the operator sees; withChallenge adds the open challenge,
// for the joiner's view only.
func (a *attestation) view(withChallenge bool) *wire.AttestationView {
	if a == nil {
		return nil
	}
	v := &wire.AttestationView{State: a.State, Reason: a.Reason, EKSHA256: a.EKSHA256, EKCertSHA256: a.EKCertSHA256,
		EKChain: a.EKChain, InventoryNodeID: a.InventoryNodeID, VerifiedAt: a.VerifiedAt}
	if withChallenge && a.State == wire.AttestationChallenged {
		v.Challenge = a.Challenge
	}
	return v
}

// evidence is the audit record of what the TPM showed.
func (a *attestation) evidence() map[string]string {
	m := map[string]string{"attestation": a.State, "ekSha256": a.EKSHA256, "ekChain": a.EKChain, "akName": a.AKName}
	if a.EKCertSHA256 != "" {
		m["ekCertSha256"] = a.EKCertSHA256
	}
	if a.ChainProblem != "" {
		m["chainProblem"] = a.ChainProblem
	}
	if a.Reason != "" {
		m["reason"] = a.Reason
	}
	return m
}

// verifiedMatches is whether a is a verified attestation whose EK or EK
// certificate is one of the inventory match keys in keys.
func (a *attestation) verifiedMatches(keys map[string]bool) bool {
	if a == nil || a.State != wire.AttestationVerified {
		return false
	}
	return keys[matchKey(wire.InventoryMatch{EKSHA256: a.EKSHA256})] ||
		(a.EKCertSHA256 != "" && keys[matchKey(wire.InventoryMatch{EKCertSHA256: a.EKCertSHA256})])
}

// autoApproveAttested gives r, whose attestation is verified, to the
// inventory: approved by the entry its TPM matches, or left pending with
// the reason. *r is then the record as stored, its attestation keeping
// the inventory's word (the entry matched, or why it waits).
func (t *txn) autoApproveAttested(r *record) error {
	ev := r.Attestation.view(false)
	ev.Reason = "" // the inventory's word is said again (or nothing, once approved)
	if _, err := t.autoApprove(r, ev); err != nil {
		return err
	}
	// An approval may have moved the record on (the delivery slot):
	// keep what the store holds now, with the inventory's word.
	stored, err := t.mustRecord(r.JoinID)
	if err != nil {
		return err
	}
	*r = stored
	if b := r.Attestation; b != nil && (ev.Reason != b.Reason || ev.InventoryNodeID != b.InventoryNodeID) {
		b.Reason, b.InventoryNodeID = ev.Reason, ev.InventoryNodeID
		return t.putRecord(r)
	}
	return nil
}

// DecodeAttestationProof decodes strictly and validates.
func DecodeAttestationProof(body []byte) (wire.AttestationProof, error) {
	var p wire.AttestationProof
	if err := strictjson.DecodeChecked(body, &p, "the attestation proof has problems", func() apierr.Fields { return attest.ProofProblems(p) }); err != nil {
		return wire.AttestationProof{}, err
	}
	return p, nil
}

// Attest takes the joiner's answer to its registration's challenge
// (POST /v1/join/registrations/{joinId}/attestation). The challenge is
// spent whatever the outcome: a proof that verifies makes the attestation
// verified, then the inventory may approve the registration in the same
// transaction; one that does not makes it failed with the reason, and the
// registration waits for a person. Another key's registration is 404; a
// registration with no open challenge (no claim, already answered, ended)
// is 409 and changes nothing.
func (s *Service) Attest(keyPin, joinID string, p wire.AttestationProof) (wire.JoinerView, error) {
	if err := attest.ProofProblems(p).Err("the attestation proof has problems"); err != nil {
		return wire.JoinerView{}, err
	}
	actor := keyActor(keyPin)
	var out wire.JoinerView
	err := s.update(func(t *txn) error {
		r, err := t.joinerRecord(keyPin, joinID)
		if err != nil {
			return err
		}
		a := r.Attestation
		switch {
		case a == nil:
			return apierr.New(apierr.Conflict, "join %s made no TPM claim: there is no challenge to answer", joinID)
		case a.State != wire.AttestationChallenged || a.Challenge == nil:
			return apierr.New(apierr.Conflict, "the TPM attestation of join %s is already %s: a challenge is answered once", joinID, a.State)
		case isFinal(r.State):
			return apierr.New(apierr.Conflict, "join %s is %s: its attestation no longer counts", joinID, r.State)
		}
		ch := attest.Challenge{AttestationChallenge: *a.Challenge, SecretSHA256: a.SecretSHA256}
		a.Challenge, a.SecretSHA256 = nil, nil
		kind := "join.attestation.verified"
		if verr := attest.VerifyProof(a.Claim, ch, p, r.KeyPin); verr != nil {
			a.State, a.Reason, kind = wire.AttestationFailed, verr.Error(), "join.attestation.failed"
		} else {
			a.State, a.Reason, a.VerifiedAt = wire.AttestationVerified, "", t.now
		}
		if err := t.putRecord(&r); err != nil {
			return err
		}
		if err := t.Audit(kind, actor, joinID, a.evidence()); err != nil {
			return err
		}
		if a.State == wire.AttestationVerified {
			// The inventory may approve it now, or says why it waits.
			if err := t.autoApproveAttested(&r); err != nil {
				return err
			}
		}
		out, err = s.joinerView(t.Tx, r)
		return err
	})
	return out, err
}
