package join

import (
	"context"
	"time"

	"stratum/apierr"
	"stratum/cluster"
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
	return s.members("")
}

// members lists the members; with asNode set, only for a member (a node
// that is not one gets what an unknown id gets).
func (s *Service) members(asNode string) (wire.MembersView, error) {
	out := wire.MembersView{Members: []wire.MemberView{}}
	err := s.view(func(tx *store.Tx) error {
		if asNode != "" {
			if _, found, err := cluster.GetMember(tx, asNode); err != nil {
				return err
			} else if !found {
				return apierr.New(apierr.NotFound, "no member %s", asNode)
			}
		}
		members, err := cluster.Members(tx)
		if err != nil {
			return err
		}
		out.Generation = cluster.Generation(tx)
		for _, m := range members {
			out.Members = append(out.Members, s.memberView(m))
		}
		return nil
	})
	return out, err
}

// membersTopic is the hub topic of the membership generation; a join id
// never contains a slash, so it cannot collide with a registration.
const membersTopic = "cluster/members"

// WaitMembers is a node's membership long-poll (SPEC 11): the members
// list, at once when the generation differs from generation, else when it
// changes, wait (+0-5% jitter) passes, ctx ends or the hub closes. Only
// members may ask.
func (s *Service) WaitMembers(ctx context.Context, nodeID string, generation uint64, wait time.Duration) (wire.MembersView, error) {
	wait = min(wait, MaxWait)
	// Subscribe before reading, as Wait does.
	sub := s.hub.Subscribe(membersTopic)
	defer sub.Cancel()
	first, err := s.members(nodeID)
	if err != nil || first.Generation != generation || wait <= 0 {
		return first, err
	}
	read := func() (wire.MembersView, error) { return s.members(nodeID) }
	return hold(ctx, s.hub, sub, wait, read, func(v wire.MembersView) bool { return v.Generation != generation })
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
	var out wire.MemberView
	err := s.update(func(t *txn) error {
		if _, found, err := cluster.GetMember(t.Tx, nodeID); err != nil {
			return err
		} else if !found {
			return apierr.New(apierr.NotFound, "no member %s", nodeID)
		}
		if cur := cluster.Generation(t.Tx); generation > cur {
			var f apierr.Fields
			f.Add("generation", "%d is ahead of the cluster's generation %d", generation, cur)
			return f.Err("the applied report has problems")
		}
		if err := t.recordApplied(nodeID, generation, "node:"+nodeID); err != nil {
			return err
		}
		if err := t.settle(); err != nil {
			return err
		}
		m, _, err := cluster.GetMember(t.Tx, nodeID)
		out = s.memberView(m)
		return err
	})
	return out, err
}
