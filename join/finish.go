package join

import (
	"strconv"

	"stratum/cluster"
	"stratum/releaseset"
	"stratum/store"
	"stratum/wire"
)

// The two ways a turn ends. Both free the slot and hand it on in the same
// transaction, and both delete the sealed delivery: the node key and the
// cluster secrets it carries are not kept longer than the turn.

// fail ends r, in its turn, as failed; its member is removed and the
// generation bumped so the others re-apply without it.
func (t *txn) fail(r *record, actor, kind, reason string) error {
	r.State, r.Reason = wire.StateFailed, reason
	if err := t.putRecord(r); err != nil {
		return err
	}
	if err := t.Audit(kind, actor, r.JoinID, map[string]string{"reason": reason}); err != nil {
		return err
	}
	if r.Assignment != nil {
		if m, found, err := cluster.GetMember(t.Tx, r.Assignment.NodeID); err != nil {
			return err
		} else if found {
			if err := t.removeMember(m, actor, map[string]string{"joinId": r.JoinID}); err != nil {
				return err
			}
		}
	}
	return t.endTurn(r)
}

// removeMember takes m out of the cluster: its OpenBao node token queued
// for revocation, the member deleted and the generation bumped (the
// founder applies it; its leaf no longer counts and its mgmt IP is free),
// its release record forgotten, audited cluster.member.removed with
// details and the new generation.
func (t *txn) removeMember(m cluster.Member, actor string, details map[string]string) error {
	if err := t.revokeMember(m); err != nil {
		return err
	}
	if err := cluster.Remove(t.Tx, m.NodeID); err != nil {
		return err
	}
	if err := releaseset.Forget(t.Tx, m.NodeID); err != nil {
		return err
	}
	details["generation"] = strconv.FormatUint(cluster.Generation(t.Tx), 10)
	return t.Audit("cluster.member.removed", actor, m.NodeID, details)
}

// join ends r as joined: its member becomes active.
func (t *txn) join(r *record) error {
	nodeID := r.Assignment.NodeID
	m, found, err := cluster.GetMember(t.Tx, nodeID)
	if err != nil {
		return err
	}
	if found {
		m.State = cluster.MemberActive
		if err := cluster.PutMember(t.Tx, m); err != nil {
			return err
		}
		if err := t.Audit("cluster.member.activated", systemActor, nodeID, map[string]string{"joinId": r.JoinID}); err != nil {
			return err
		}
	}
	r.State, r.Reason = wire.StateJoined, ""
	if err := t.putRecord(r); err != nil {
		return err
	}
	g := strconv.FormatUint(r.Generation, 10)
	if err := t.Audit("join.joined", systemActor, r.JoinID, map[string]string{"nodeId": nodeID, "generation": g}); err != nil {
		return err
	}
	return t.endTurn(r)
}

func (t *txn) endTurn(r *record) error {
	if err := bucketDeliveries.Delete(t.Tx, r.JoinID); err != nil {
		return err
	}
	if turn(t.Tx) == r.JoinID {
		if err := t.setTurn(""); err != nil {
			return err
		}
	}
	return t.advance()
}

// settles says whether settle would make the join in its turn joined.
func (s *Service) settles(tx *store.Tx) (bool, error) {
	id := turn(tx)
	if id == "" {
		return false, nil
	}
	r, found, err := bucketRegistrations.GetDecoded(tx, id, &s.turnRecord)
	switch {
	case err != nil:
		return false, err
	case !found:
		return true, nil // settle's to report
	case !inTurn(r.State) || r.Generation == 0:
		return false, nil
	}
	return s.decoded.AllAppliedIn(tx, r.Generation)
}

// settle makes the join in its turn joined once every member in joining
// or active has applied the generation it was admitted at. Every
// member's report of that generation asks it of the same records: they
// are read through the service's decoded ones, and the join's record
// again, as a copy of its own, only to change it.
func (t *txn) settle() error {
	id := turn(t.Tx)
	if id == "" {
		return nil
	}
	r, found, err := bucketRegistrations.GetDecoded(t.Tx, id, &t.s.turnRecord)
	if err != nil {
		return err
	}
	if !found {
		return notFound(id)
	}
	if !inTurn(r.State) || r.Generation == 0 {
		return nil
	}
	if all, err := t.s.decoded.AllAppliedIn(t.Tx, r.Generation); err != nil || !all {
		return err
	}
	if r, err = t.mustRecord(id); err != nil {
		return err
	}
	return t.join(&r)
}
