package join

import (
	"context"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/iam"
	"stratum/store"
	"stratum/strictjson"
	"stratum/wire"
)

func (s *Service) memberView(m cluster.Member) wire.MemberView {
	v := m.MemberView
	v.Networks, v.Labels = orEmpty(v.Networks), orEmpty(v.Labels)
	v.BootState, v.BootPhase, v.BootPhaseMs, v.LastBootMs = "", "", 0, 0
	if s.cfg.Boot != nil {
		if b, ok := s.cfg.Boot.Boot(m.NodeID); ok {
			v.BootState, v.BootPhase, v.BootPhaseMs, v.LastBootMs = b.State, b.Phase, b.PhaseMs, b.LastBootMs
		}
	}
	return v
}

// Members lists the members in join order with the current generation.
func (s *Service) Members() (wire.MembersView, error) {
	var out wire.MembersView
	err := s.view(func(tx *store.Tx) error {
		var err error
		out, err = s.membersList(tx, cluster.Generation(tx))
		return err
	})
	return out, err
}

// membersList is the members in join order at generation, as the admin
// list and the nodes' list both answer them.
func (s *Service) membersList(tx *store.Tx, generation uint64) (wire.MembersView, error) {
	members, err := s.decoded.Members(tx)
	if err != nil {
		return wire.MembersView{}, err
	}
	out := wire.MembersView{Generation: generation, Members: make([]wire.MemberView, 0, len(members))}
	for _, m := range members {
		out.Members = append(out.Members, s.memberView(m))
	}
	return out, nil
}

// membersTopic is the hub topic of the membership generation; a join id
// never contains a slash, so it cannot collide with a registration.
const membersTopic = "cluster/members"

// WaitMembers is a node's membership long-poll (SPEC 11): the members
// list, at once when the generation differs from generation, else when it
// changes, wait (+0-5% jitter) passes, ctx ends or the hub closes. Only
// members may ask.
func (s *Service) WaitMembers(ctx context.Context, nodeID string, generation uint64, wait time.Duration) (NodeMembers, error) {
	wait = min(wait, MaxWait)
	// Subscribe before reading, as Wait does.
	sub := s.hub.Subscribe(membersTopic)
	defer sub.Cancel()
	first, err := s.nodeMembers(nodeID)
	if err != nil || first.Generation != generation || wait <= 0 {
		return first, err
	}
	read := func() (NodeMembers, error) { return s.nodeMembers(nodeID) }
	return hold(ctx, s.hub, sub, wait, read, func(v NodeMembers) bool { return v.Generation != generation })
}

// DecodeApplied decodes PUT /v1/cluster/members/{nodeId}/applied.
func DecodeApplied(body []byte) (uint64, error) {
	var req struct {
		Generation *uint64 `json:"generation"`
	}
	err := strictjson.DecodeChecked(body, &req, "the applied report has problems", func() apierr.Fields {
		var f apierr.Fields
		if req.Generation == nil {
			f.Add("generation", "required")
		} else if g := *req.Generation; g < 1 || g > 1<<53 {
			f.Add("generation", "must be a whole number of at least 1")
		}
		return f
	})
	if err != nil {
		return 0, err
	}
	return *req.Generation, nil
}

// Applied records that nodeID applied generation (its own report, with
// its transport leaf), and makes the join in its turn joined once every
// member has applied the generation it was admitted at.
func (s *Service) Applied(nodeID string, generation uint64) (wire.MemberView, error) {
	// Every member reports each generation it applies, N writes a join:
	// a report that changes nothing (a retry whose answer was lost, an
	// agent started again) is answered from a read, and the others share
	// commits (batch: the members learn of a generation at once and
	// report together).
	out, changes, err := s.appliedChanges(nodeID, generation)
	if err != nil || !changes {
		return out, err
	}
	err = s.batch(func(t *txn) error {
		if _, err := s.checkApplied(t.Tx, nodeID, generation); err != nil {
			return err
		}
		if err := t.recordApplied(nodeID, generation, "node:"+nodeID); err != nil {
			return err
		}
		if err := t.settle(); err != nil {
			return err
		}
		m, _, err := s.decoded.Member(t.Tx, nodeID)
		out = s.memberView(m)
		return err
	})
	return out, err
}

// checkApplied refuses a report of an unknown member (404) or of a
// generation ahead of the cluster's (400); it answers the member. The
// members report each generation together: their records are read
// through the service's decoded ones.
func (s *Service) checkApplied(tx *store.Tx, nodeID string, generation uint64) (cluster.Member, error) {
	m, found, err := s.decoded.Member(tx, nodeID)
	if err != nil {
		return m, err
	} else if !found {
		return m, apierr.New(apierr.NotFound, "no member %s", nodeID)
	}
	if cur := cluster.Generation(tx); generation > cur {
		var f apierr.Fields
		f.Add("generation", "%d is ahead of the cluster's generation %d", generation, cur)
		return m, f.Err("the applied report has problems")
	}
	return m, nil
}

// appliedChanges checks a report in a read and says whether recording it
// would change anything: a generation newer than the member's, or a join
// in its turn that every member has now applied (settled by the write).
// When it would not, out is the member as it stands.
func (s *Service) appliedChanges(nodeID string, generation uint64) (out wire.MemberView, changes bool, err error) {
	err = s.view(func(tx *store.Tx) error {
		m, err := s.checkApplied(tx, nodeID, generation)
		if err != nil {
			return err
		}
		if generation > m.AppliedGeneration {
			changes = true
			return nil
		}
		if changes, err = s.settles(tx); err != nil || changes {
			return err
		}
		out = s.memberView(m)
		return nil
	})
	return out, changes, err
}

// RemoveMember takes a member out of the cluster for good (a node whose
// hardware is gone holds every later join in installing while it cannot
// apply their generation): in one transaction the member is deleted, the
// generation bumped (the founder applies it), its release record
// forgotten, its OpenBao node token queued for revocation, its mgmt IP
// freed, and the removal audited with the person and the reason; a join
// that waited only for it becomes joined. It answers the member as it was.
//
// Refused: no reason (400), an unknown node (404), the founder's own
// member (409: it cannot remove itself) and a member whose join is still
// delivering or installing (409: that join is cancelled instead).
func (s *Service) RemoveMember(by iam.Principal, nodeID, reason string) (wire.MemberView, error) {
	if err := requiredReason(reason, "for the audit log"); err != nil {
		return wire.MemberView{}, err
	}
	var out wire.MemberView
	err := s.update(func(t *txn) error {
		m, err := t.mustMember(nodeID)
		if err != nil {
			return err
		}
		id, err := cluster.LoadIdentity(t.Tx)
		if err != nil {
			return err
		}
		if nodeID == id.FounderNodeID {
			return apierr.New(apierr.Conflict, "member %s is the founder: it cannot remove itself", nodeID)
		}
		details := map[string]string{"reason": reason}
		if m.JoinID != "" {
			r, found, err := t.getRecord(m.JoinID)
			if err != nil {
				return err
			}
			if found && inTurn(r.State) {
				return apierr.New(apierr.Conflict, "member %s is still joining: its join %s is %s; cancel it with `stratum joins cancel %s`", nodeID, r.JoinID, r.State, r.JoinID)
			}
			details["joinId"] = m.JoinID
		}
		out = s.memberView(m)
		if err := t.removeMember(m, actorOf(by), details); err != nil {
			return err
		}
		return t.settle()
	})
	return out, err
}
