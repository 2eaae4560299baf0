package join

import (
	"fmt"
	"strings"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/wire"
)

// inventoryActor is who an approval by the inventory is audited as.
const inventoryActor = "inventory"

// autoApprove approves r, pending, with the assignment of the inventory
// entry that recognises it, without a person: by the TPM's EK (or its
// certificate) when ev is a verified attestation, else, when ev is nil
// (for a registration that made no TPM claim), by the
// registration key's fingerprint, the weaker match. A verified TPM whose
// entry's node id is an active member is that member's machine
// reinstalled (a new key, the same TPM): it replaces the member in this
// transaction. It answers whether r was approved. A registration that
// claimed a TPM is never matched by its key, whatever its attestation
// came to.
//
// Anything else leaves r pending for a person with the reason in
// r.AutoApproval (and, for a TPM, in ev.Reason; ev.InventoryNodeID names
// the entry matched): no entry, an attestation that is not verified,
// another role, an entry whose node id a join under way holds, an
// assignment the cluster refuses. Only errors of the store are errors:
// a refusal writes nothing but the reason. On return *r is the record as
// stored: a caller that changes it further stores it again.
func (t *txn) autoApprove(r *record, ev *wire.AttestationView) (bool, error) {
	if r.State != wire.StatePending {
		return false, nil
	}
	var keys []string
	switch {
	case ev == nil && r.TPMClaim:
		return false, nil // its proof decides, not its key
	case ev == nil:
		keys = []string{"key:" + strings.ToLower(r.KeyPin)}
	case ev.State != wire.AttestationVerified:
		return false, t.waitFor(r, ev, "the TPM attestation is %s, not verified: a person decides", ev.State)
	default:
		keys = []string{"ek:" + strings.ToLower(ev.EKSHA256)}
		if ev.EKCertSHA256 != "" {
			keys = append(keys, "ekcert:"+strings.ToLower(ev.EKCertSHA256))
		}
	}
	var e wire.InventoryEntry
	var key string
	for _, k := range keys {
		entry, found, err := inventoryEntry(t.Tx, k)
		if err != nil {
			return false, err
		}
		if found {
			e, key = entry, k
			break
		}
	}
	if key == "" {
		if ev == nil {
			// Without an inventory a key pin is no news to anyone.
			if meta, _, err := inventoryMeta.Get(t.Tx); err != nil || meta.Count == 0 {
				return false, err
			}
			return false, t.waitFor(r, ev, "no inventory entry matches its key %s", r.KeyPin)
		}
		return false, t.waitFor(r, ev, "no inventory entry matches its TPM (EK %s)", ev.EKSHA256)
	}
	kind, hash, _ := strings.Cut(key, ":")
	kind = map[string]string{"ek": "ekSha256", "ekcert": "ekCertSha256", "key": "keyFingerprint"}[kind]
	if ev != nil {
		ev.InventoryNodeID = e.NodeID
	}
	evidence := map[string]string{"match": kind, "matchHash": hash, "inventoryNodeId": e.NodeID}
	if ev != nil && ev.EKChain != "" {
		evidence["ekChain"] = ev.EKChain
	}
	if e.Role != r.Role {
		return false, t.waitFor(r, ev, "inventory entry %s (%s) is for role %s; its join token is for %s", e.NodeID, kind, e.Role, r.Role)
	}
	m, isMember, err := cluster.GetMember(t.Tx, e.NodeID)
	if err != nil {
		return false, err
	}
	a := normalized(entryAssignment(e))
	switch {
	case isMember && m.State != cluster.MemberActive:
		return false, t.waitFor(r, ev, "inventory entry %s is taken: its join %s is under way", e.NodeID, m.JoinID)
	case isMember && ev == nil:
		return false, t.waitFor(r, ev, "inventory entry %s is member %s already; a key fingerprint does not replace a member (`stratum members replace %s --join %s` does)", e.NodeID, e.NodeID, e.NodeID, r.JoinID)
	case isMember:
		evidence["reason"] = "reinstalled: the same TPM registered with a new key"
		if err := t.replaceable(m, r); err != nil {
			return false, t.waitForRefusal(r, ev, "inventory entry "+e.NodeID+" is a reinstalled member, but", err)
		}
		r.AutoApproval = fmt.Sprintf("replaces member %s: inventory entry %s (%s), the same TPM with a new key", m.NodeID, e.NodeID, kind)
		if err := t.replace(m, r, inventoryActor, evidence); err != nil {
			return false, err
		}
	default:
		if id := claimedBy(t.Tx, "n/"+e.NodeID, r.JoinID); id != "" {
			return false, t.waitFor(r, ev, "inventory entry %s is taken by approved join %s", e.NodeID, id)
		}
		if _, _, err := t.approvable(r, a, ""); err != nil {
			return false, t.waitForRefusal(r, ev, "inventory entry "+e.NodeID+" matches, but", err)
		}
		r.AutoApproval = fmt.Sprintf("approved by inventory entry %s (%s)", e.NodeID, kind)
		if err := t.approve(r, a, inventoryActor, evidence); err != nil {
			return false, err
		}
	}
	// The approval may have gone on to give it the slot (delivering):
	// the caller gets the record as stored, not as approve left it.
	stored, err := t.mustRecord(r.JoinID)
	*r = stored
	return err == nil, err
}

// waitFor leaves r pending for a person with why, kept for the operator.
func (t *txn) waitFor(r *record, ev *wire.AttestationView, format string, args ...any) error {
	why := fmt.Sprintf(format, args...)
	if ev != nil {
		ev.Reason = why
	}
	if r.AutoApproval == why {
		return nil
	}
	r.AutoApproval = why
	if err := t.putRecord(r); err != nil {
		return err
	}
	return t.Audit("join.autoapproval.waiting", inventoryActor, r.JoinID, map[string]string{"reason": why})
}

// waitForRefusal is waitFor with a refusal of the domain's (a store error
// is passed on).
func (t *txn) waitForRefusal(r *record, ev *wire.AttestationView, prefix string, err error) error {
	e, ok := apierr.As(err)
	if !ok {
		return err
	}
	why := e.Message
	for _, f := range e.Fields {
		why += "; " + f.Field + ": " + f.Message
	}
	return t.waitFor(r, ev, "%s %s", prefix, why)
}
