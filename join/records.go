package join

import (
	"encoding/json"
	"fmt"
	"stratum/wire"
	"time"
)

const keyTurn = "turn" // bucketMeta: the join in delivering or installing

func validState(s string) bool {
	for _, st := range wire.States {
		if s == st {
			return true
		}
	}
	return false
}

// final states end a registration: its key needs a new token to register again.
func isFinal(state string) bool {
	return state == wire.StateJoined || state == wire.StateRejected || state == wire.StateFailed
}

// inTurn states hold the single delivery slot.
func inTurn(state string) bool { return state == wire.StateDelivering || state == wire.StateInstalling }

// record is a registration as stored. Secrets never live here: the
// delivery is sealed in its own bucket.
type record struct {
	// Seq orders registrations by creation: timestamps tie.
	Seq         uint64           `json:"seq"`
	JoinID      string           `json:"joinId"`
	KeyPin      string           `json:"keyPin"`
	State       string           `json:"state"`
	Reason      string           `json:"reason"`
	Role        string           `json:"role"`
	Release     string           `json:"release"`
	SelfUpgrade bool             `json:"selfUpgrade"`
	Hostname    string           `json:"hostname"`
	MgmtIP      string           `json:"mgmtIp"`
	MachineID   string           `json:"machineId"`
	Facts       json.RawMessage  `json:"facts,omitempty"`
	TokenID     string           `json:"tokenId"`
	CreatedAt   time.Time        `json:"createdAt"`
	UpdatedAt   time.Time        `json:"updatedAt"`
	Upgrade     *wire.Upgrade    `json:"upgrade,omitempty"`
	Assignment  *wire.Assignment `json:"assignment,omitempty"`
	// MgmtIPSource says who chose the assignment's mgmtIp.
	MgmtIPSource string    `json:"mgmtIpSource,omitempty"`
	ApprovedBy   string    `json:"approvedBy,omitempty"`
	ApprovedAt   time.Time `json:"approvedAt,omitzero"`
	// TPMClaim: the joiner claimed a TPM. Only its verified attestation
	// matches it to the inventory, never its key.
	TPMClaim bool `json:"tpmClaim,omitempty"`
	// AutoApproval is what the inventory made of it (OperatorView).
	AutoApproval string    `json:"autoApproval,omitempty"`
	QueueSeq     uint64    `json:"queueSeq,omitempty"`
	Generation   uint64    `json:"generation,omitempty"` // admitted at
	DeliveredAt  time.Time `json:"deliveredAt,omitzero"`
	DoneAt       time.Time `json:"doneAt,omitzero"`
}

// queueKey orders the queue bucket numerically under bbolt's byte order.
func queueKey(seq uint64) string { return fmt.Sprintf("%020d", seq) }
