package join

import (
	"bytes"
	"encoding/json"
	"maps"
	"strconv"

	"stratum/apierr"
	"stratum/attest"
	"stratum/store"
	"stratum/wire"
)

// Register records a joiner's registration under its key pin (SPEC 4.2).
// created is true for a new registration (201), false when the key's
// open registration is answered again (200, no token use).
func (s *Service) Register(keyPin string, req wire.RegisterRequest) (view wire.JoinerView, created bool, err error) {
	if keyPin == "" {
		return wire.JoinerView{}, false, apierr.New(apierr.Unauthenticated, "the join listener needs the joiner's client certificate")
	}
	if err := registerProblems(req).Err("the registration has problems"); err != nil {
		return wire.JoinerView{}, false, err
	}
	var ev attest.Evidence
	if req.Attestation != nil {
		if ev, err = s.checkClaim(req.Attestation); err != nil {
			return wire.JoinerView{}, false, err
		}
	}
	if err := s.precheck(keyPin, req); err != nil {
		return wire.JoinerView{}, false, err
	}
	// The challenge is made once, outside the batch that may run again.
	var tpmClaim *claimed
	if req.Attestation != nil {
		if tpmClaim, err = s.challenge(*req.Attestation, ev); err != nil {
			return wire.JoinerView{}, false, err
		}
	}
	actor := keyActor(keyPin)
	// refused is a refusal found in the batch before anything was
	// written: answered by assignment, not as the call's error, since a
	// failing call makes bbolt run the whole batch again.
	var refused error
	err = s.batch(func(t *txn) error {
		view, created, refused = wire.JoinerView{}, false, nil
		if prev := bucketKeys.Get(t.Tx, keyPin); prev != nil {
			r, found, err := t.getRecord(string(prev))
			if err != nil {
				return err
			}
			if found && !isFinal(r.State) {
				if err := s.reregister(t, &r, req, actor); err != nil {
					return err
				}
				view, err = s.joinerView(t.Tx, r)
				return err
			}
		}
		// The token before the release: a RELEASE_MISMATCH tells the
		// cluster's release, which only a token holder may learn.
		tok, err := redeemable(t.Tx, req.Token, t.now, &s.tokens)
		if err != nil {
			refused = err
			return nil
		}
		// After the token: which addresses are refused tells what the
		// founder and its VIPs answer on.
		if err := s.checkMgmtAddr(t.Tx, req.MgmtIP, apierr.InvalidInput); err != nil {
			refused = err
			return nil
		}
		state, upgrade, err := s.releaseRule(t.Tx, req.Release, req.SelfUpgrade)
		if err != nil {
			refused = err // the token is not spent: nothing was written
			return nil
		}
		seq, err := bucketRegistrations.NextSequence(t.Tx)
		if err != nil {
			return err
		}
		joinID, err := newJoinID(t.Tx, seq)
		if err != nil {
			return err
		}
		r := record{Seq: seq, JoinID: joinID, KeyPin: keyPin, State: state, Role: tok.Role, Release: req.Release,
			SelfUpgrade: req.SelfUpgrade, Hostname: req.Hostname, MgmtIP: normalIPOrEmpty(req.MgmtIP), MachineID: req.MachineID,
			Facts: compactFacts(req.Facts), TokenID: tok.ID, CreatedAt: t.now, Upgrade: upgrade, TPMClaim: req.Attestation != nil}
		audit := map[string]string{"state": state, "role": r.Role, "release": r.Release, "hostname": r.Hostname, "tokenId": tok.ID}
		if tpmClaim != nil {
			r.Attestation = tpmClaim.record()
			maps.Copy(audit, r.Attestation.evidence())
		}
		if err := t.putRecord(&r); err != nil {
			return err
		}
		if err := bucketKeys.Put(t.Tx, keyPin, []byte(joinID)); err != nil {
			return err
		}
		// One event tells the registration and the token's use.
		usesLeft, err := t.useToken(tok)
		if err != nil {
			return err
		}
		audit["usesLeft"] = strconv.Itoa(usesLeft)
		if err := t.Audit("join.registered", actor, joinID, audit); err != nil {
			return err
		}
		// A joiner with a TPM is matched once it proves it; one without
		// by its key, the weaker match.
		if !r.TPMClaim {
			puts := t.puts
			if _, err := t.autoApprove(&r, nil); err != nil {
				return err
			}
			// Read back only what it wrote (its steps write a copy).
			if t.puts != puts {
				if r, err = t.mustRecord(joinID); err != nil {
					return err
				}
			}
		}
		created = true
		view, err = s.joinerView(t.Tx, r)
		return err
	})
	if err == nil && refused != nil {
		return wire.JoinerView{}, false, refused
	}
	return view, created, err
}

// precheck refuses, in a read-only transaction, a new key's unusable
// token, so that a flood of requests without a valid token never reaches
// a write batch (each batch is a commit and an fsync). What only a token
// holder can get wrong (the management address, the release) is checked
// in the batch alone, where a refusal is answered without failing it.
//
// A token the last batch to read it found redeemable lets the request on
// without this read: the batch reads it again and refuses what is no
// longer so, and a flood of a token spent since costs one batch, whose
// read of the spent token sends the next ones through this read.
func (s *Service) precheck(keyPin string, req wire.RegisterRequest) error {
	if redeemableAsLastRead(req.Token, s.now().UTC(), &s.tokens) {
		return nil
	}
	return s.view(func(tx *store.Tx) error {
		if prev := bucketKeys.Get(tx, keyPin); prev != nil {
			return nil // an open or final registration: Register decides
		}
		_, err := redeemable(tx, req.Token, s.now().UTC(), &s.tokens)
		return err
	})
}

// reregister answers a key's open registration again. Only needs-upgrade
// changes: on the cluster release it becomes pending (what the joiner
// reports about itself is refreshed, since its OS changed); on another
// older release its upgrade is recomputed. Past needs-upgrade the operator
// has seen and judged the registration, so nothing is rewritten.
func (s *Service) reregister(t *txn, r *record, req wire.RegisterRequest, actor string) error {
	if r.State != wire.StateNeedsUpgrade {
		return nil
	}
	state, upgrade, err := s.releaseRule(t.Tx, req.Release, req.SelfUpgrade)
	if err != nil {
		return err
	}
	from := r.Release
	switch state {
	case wire.StatePending:
		if err := s.checkMgmtAddr(t.Tx, req.MgmtIP, apierr.InvalidInput); err != nil {
			return err
		}
		r.State, r.Upgrade, r.Release = wire.StatePending, nil, req.Release
		r.TPMClaim = r.TPMClaim || req.Attestation != nil
		r.Hostname, r.MgmtIP, r.MachineID, r.Facts = req.Hostname, normalIPOrEmpty(req.MgmtIP), req.MachineID, compactFacts(req.Facts)
	case wire.StateNeedsUpgrade:
		if r.Release == req.Release && r.Upgrade != nil && *r.Upgrade == *upgrade {
			return nil
		}
		r.Release, r.Upgrade = req.Release, upgrade
	}
	if err := t.putRecord(r); err != nil {
		return err
	}
	if err := t.Audit("join.reregistered", actor, r.JoinID, map[string]string{"state": r.State, "from": from, "release": r.Release}); err != nil {
		return err
	}
	if r.State != wire.StatePending {
		return nil
	}
	// A TPM joiner is matched by its proof alone, also after it upgraded
	// itself and registered again without a claim.
	var ev *wire.AttestationView
	switch {
	case r.Attestation != nil && r.Attestation.State == wire.AttestationVerified:
		ev = r.Attestation.view(false)
	case r.TPMClaim:
		return nil
	}
	if _, err := t.autoApprove(r, ev); err != nil {
		return err
	}
	reread, err := t.mustRecord(r.JoinID)
	*r = reread
	return err
}

func keyActor(keyPin string) string { return "key:" + keyPin }

func normalIPOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return normalIP(s)
}

// compactFacts stores facts without insignificant whitespace; null and
// absent are both "no facts".
func compactFacts(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil
	}
	return buf.Bytes()
}
