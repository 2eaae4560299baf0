package join

import (
	"encoding/json"
	"fmt"
	"time"

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
	return v, nil
}

func operatorView(r record, pos int) OperatorView {
	facts := r.Facts
	if len(facts) == 0 {
		facts = json.RawMessage("{}")
	}
	v := OperatorView{JoinID: r.JoinID, State: r.State, Reason: r.Reason, Role: r.Role, Release: r.Release,
		KeyFingerprint: r.KeyPin, QueuePosition: pos, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Hostname: r.Hostname, MgmtIP: r.MgmtIP, MachineID: r.MachineID, SelfUpgrade: r.SelfUpgrade, Facts: facts,
		TokenID: r.TokenID, Assignment: r.Assignment, ApprovedBy: r.ApprovedBy, ApprovedAt: r.ApprovedAt, Generation: r.Generation}
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
	return operatorView(r, pos), err
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
