package join

import (
	"encoding/json"
	"fmt"
	"time"

	"stratum/cluster"
	"stratum/store"
)

// JoinerView is what the joiner sees of its registration (SPEC 4.3).
type JoinerView struct {
	JoinID         string    `json:"joinId"`
	State          string    `json:"state"`
	Reason         string    `json:"reason"`
	Role           string    `json:"role"`
	Release        string    `json:"release"`
	KeyFingerprint string    `json:"keyFingerprint"`
	QueuePosition  int       `json:"queuePosition"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// Upgrade is present only in needs-upgrade.
	Upgrade *Upgrade `json:"upgrade,omitempty"`
	// Delivery is present only in delivering and installing.
	Delivery *Delivery `json:"delivery,omitempty"`
	// Generation and WaitingFor are present only in installing: the
	// membership generation the node was admitted at and the members that
	// have not applied it yet (SPEC 17: a stall names what it waits for).
	Generation uint64      `json:"generation,omitempty"`
	WaitingFor []MemberLag `json:"waitingFor,omitempty"`
}

// MemberLag is a member that has not applied a join's generation yet.
type MemberLag struct {
	NodeID            string `json:"nodeId"`
	AppliedGeneration uint64 `json:"appliedGeneration"`
}

// OperatorView is the operator's view (SPEC 4.4): never the delivery.
type OperatorView struct {
	JoinID         string    `json:"joinId"`
	State          string    `json:"state"`
	Reason         string    `json:"reason"`
	Role           string    `json:"role"`
	Release        string    `json:"release"`
	KeyFingerprint string    `json:"keyFingerprint"`
	QueuePosition  int       `json:"queuePosition"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	Upgrade        *Upgrade  `json:"upgrade,omitempty"`
	Hostname       string    `json:"hostname"`
	MgmtIP         string    `json:"mgmtIp"`
	// MgmtIPSource says who chose the address that goes (or went) into
	// the node's certificate: "joiner" or "operator"; empty when none.
	MgmtIPSource string          `json:"mgmtIpSource,omitempty"`
	MachineID    string          `json:"machineId"`
	SelfUpgrade  bool            `json:"selfUpgrade"`
	Facts        json.RawMessage `json:"facts"`
	TokenID      string          `json:"tokenId"`
	// Assignment is present once approved.
	Assignment *Assignment `json:"assignment,omitempty"`
	ApprovedBy string      `json:"approvedBy,omitempty"`
	ApprovedAt time.Time   `json:"approvedAt,omitzero"`
	// Generation is the membership generation the node was admitted at.
	Generation uint64 `json:"generation,omitempty"`
	// WaitingFor is present only in installing: the members that have not
	// applied Generation yet.
	WaitingFor []MemberLag `json:"waitingFor,omitempty"`
}

// waitingFor names the members a join in installing waits for.
func waitingFor(r record, members []cluster.Member) []MemberLag {
	if r.State != StateInstalling || r.Generation == 0 {
		return nil
	}
	var out []MemberLag
	for _, m := range cluster.Lagging(members, r.Generation) {
		if r.Assignment != nil && m.NodeID == r.Assignment.NodeID {
			continue // the joiner itself applies it by finishing
		}
		out = append(out, MemberLag{NodeID: m.NodeID, AppliedGeneration: m.AppliedGeneration})
	}
	return out
}

// installingMembers reads the members only when r waits on them.
func installingMembers(tx *store.Tx, r record) ([]cluster.Member, error) {
	if r.State != StateInstalling {
		return nil, nil
	}
	return cluster.Members(tx)
}

func joinerView(tx *store.Tx, r record, boot BootHealth) (JoinerView, error) {
	pos, err := queuePosition(tx, r)
	if err != nil {
		return JoinerView{}, err
	}
	v := JoinerView{JoinID: r.JoinID, State: r.State, Reason: r.Reason, Role: r.Role, Release: r.Release,
		KeyFingerprint: r.KeyPin, QueuePosition: pos, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.State == StateNeedsUpgrade {
		v.Upgrade = r.Upgrade
	}
	if inTurn(r.State) {
		d, err := loadDelivery(tx, r.JoinID)
		if err != nil {
			return JoinerView{}, err
		}
		d.Bundle.Nodes = withBoot(d.Bundle.Nodes, boot)
		v.Delivery = d
	}
	members, err := installingMembers(tx, r)
	if err != nil {
		return JoinerView{}, err
	}
	if v.WaitingFor = waitingFor(r, members); r.State == StateInstalling {
		v.Generation = r.Generation
	}
	return v, nil
}

func operatorView(r record, pos int, members []cluster.Member) OperatorView {
	facts := r.Facts
	if len(facts) == 0 {
		facts = json.RawMessage("{}")
	}
	v := OperatorView{JoinID: r.JoinID, State: r.State, Reason: r.Reason, Role: r.Role, Release: r.Release,
		KeyFingerprint: r.KeyPin, QueuePosition: pos, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Hostname: r.Hostname, MgmtIP: r.MgmtIP, MachineID: r.MachineID, SelfUpgrade: r.SelfUpgrade, Facts: facts,
		TokenID: r.TokenID, Assignment: r.Assignment, ApprovedBy: r.ApprovedBy, ApprovedAt: r.ApprovedAt, Generation: r.Generation,
		WaitingFor: waitingFor(r, members)}
	if r.State == StateNeedsUpgrade {
		v.Upgrade = r.Upgrade
	}
	switch {
	case r.MgmtIPSource != "":
		v.MgmtIPSource = r.MgmtIPSource
	case r.Assignment != nil && r.Assignment.MgmtIP != "" && r.Assignment.MgmtIP != r.MgmtIP:
		v.MgmtIPSource = MgmtIPFromOperator // approved by an earlier build
	case r.MgmtIP != "" || r.Assignment != nil:
		v.MgmtIPSource = MgmtIPFromJoiner
	}
	return v
}

func operatorViewTx(tx *store.Tx, r record) (OperatorView, error) {
	pos, err := queuePosition(tx, r)
	if err != nil {
		return OperatorView{}, err
	}
	members, err := installingMembers(tx, r)
	return operatorView(r, pos, members), err
}

// loadDelivery opens the sealed delivery of an in-turn join.
func loadDelivery(tx *store.Tx, joinID string) (*Delivery, error) {
	raw, found, err := tx.GetSealed(bucketDeliveries, joinID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("join %s is in its turn but its delivery is missing from the store", joinID)
	}
	var d Delivery
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("join %s: decode delivery: %w", joinID, err)
	}
	return &d, nil
}
