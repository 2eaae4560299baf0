package join

import (
	"encoding/json"
	"fmt"

	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// waitingFor names the members a join in installing waits for.
func waitingFor(r record, members []cluster.Member) []wire.MemberLag {
	if r.State != wire.StateInstalling || r.Generation == 0 {
		return nil
	}
	var out []wire.MemberLag
	for _, m := range cluster.Lagging(members, r.Generation) {
		if r.Assignment != nil && m.NodeID == r.Assignment.NodeID {
			continue // the joiner itself applies it by finishing
		}
		out = append(out, wire.MemberLag{NodeID: m.NodeID, AppliedGeneration: m.AppliedGeneration})
	}
	return out
}

// installingMembers reads the members only when r waits on them (through
// the service's decoded records: what it answers is shared, read only).
func (s *Service) installingMembers(tx *store.Tx, r record) ([]cluster.Member, error) {
	if r.State != wire.StateInstalling {
		return nil, nil
	}
	return s.decoded.Members(tx)
}

// registration is what both views of r begin with.
func registration(r record, pos int) wire.Registration {
	reg := wire.Registration{JoinID: r.JoinID, State: r.State, Reason: r.Reason, Role: r.Role, Release: r.Release,
		KeyFingerprint: r.KeyPin, QueuePosition: pos, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.State == wire.StateNeedsUpgrade {
		reg.Upgrade = r.Upgrade
	}
	reg.Attestation = r.Attestation.view(false)
	return reg
}

func (s *Service) joinerView(tx *store.Tx, r record) (wire.JoinerView, error) {
	pos, err := queuePosition(tx, r)
	if err != nil {
		return wire.JoinerView{}, err
	}
	v := wire.JoinerView{Registration: registration(r, pos)}
	v.Attestation = r.Attestation.view(true) // the challenge is the joiner's alone
	if inTurn(r.State) {
		d, err := loadDelivery(tx, r.JoinID)
		if err != nil {
			return wire.JoinerView{}, err
		}
		d.Bundle.Nodes = withBoot(d.Bundle.Nodes, s.cfg.Boot)
		v.Delivery = d
	}
	members, err := s.installingMembers(tx, r)
	if err != nil {
		return wire.JoinerView{}, err
	}
	if v.WaitingFor = waitingFor(r, members); r.State == wire.StateInstalling {
		v.Generation = r.Generation
	}
	return v, nil
}

func operatorView(r record, pos int, members []cluster.Member) wire.OperatorView {
	facts := r.Facts
	if len(facts) == 0 {
		facts = json.RawMessage("{}")
	}
	v := wire.OperatorView{Registration: registration(r, pos),
		Hostname: r.Hostname, MgmtIP: r.MgmtIP, MachineID: r.MachineID, SelfUpgrade: r.SelfUpgrade, Facts: facts,
		TokenID: r.TokenID, Assignment: r.Assignment, ApprovedBy: r.ApprovedBy, ApprovedAt: r.ApprovedAt, Generation: r.Generation, AutoApproval: r.AutoApproval,
		WaitingFor: waitingFor(r, members)}
	switch {
	case r.MgmtIPSource != "":
		v.MgmtIPSource = r.MgmtIPSource
	case r.Assignment != nil && r.Assignment.MgmtIP != "" && r.Assignment.MgmtIP != r.MgmtIP:
		v.MgmtIPSource = wire.MgmtIPFromOperator // approved by an earlier build
	case r.MgmtIP != "" || r.Assignment != nil:
		v.MgmtIPSource = wire.MgmtIPFromJoiner
	}
	return v
}

func (s *Service) operatorViewTx(tx *store.Tx, r record) (wire.OperatorView, error) {
	pos, err := queuePosition(tx, r)
	if err != nil {
		return wire.OperatorView{}, err
	}
	members, err := s.installingMembers(tx, r)
	return operatorView(r, pos, members), err
}

// loadDelivery opens the sealed delivery of an in-turn join.
func loadDelivery(tx *store.Tx, joinID string) (*wire.Delivery, error) {
	raw, found, err := bucketDeliveries.GetSealed(tx, joinID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("join %s is in its turn but its delivery is missing from the store", joinID)
	}
	var d wire.Delivery
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("join %s: decode delivery: %w", joinID, err)
	}
	return &d, nil
}
