package joiner

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The wire format of the join listener (SPEC 4.2, 4.3, 4.5, 4.6), written
// here rather than imported from the founder's join package: the joiner is
// a network peer of the founder, and the protocol, not the founder's Go
// types, is the contract between them.

// Registration states (SPEC 4.3).
const (
	statePending      = "pending"
	stateNeedsUpgrade = "needs-upgrade"
	stateApproved     = "approved"
	stateDelivering   = "delivering"
	stateInstalling   = "installing"
	stateJoined       = "joined"
	stateRejected     = "rejected"
	stateFailed       = "failed"
)

func isFinal(state string) bool {
	return state == stateJoined || state == stateRejected || state == stateFailed
}

// registerRequest is the body of POST /v1/join/registrations.
type registerRequest struct {
	Token       string         `json:"token"`
	Release     string         `json:"release"`
	SelfUpgrade bool           `json:"selfUpgrade"`
	Hostname    string         `json:"hostname"`
	MgmtIP      string         `json:"mgmtIp,omitempty"`
	MachineID   string         `json:"machineId"`
	Facts       map[string]any `json:"facts,omitempty"`
}

// view is the joiner's view of its registration.
type view struct {
	JoinID         string    `json:"joinId"`
	State          string    `json:"state"`
	Reason         string    `json:"reason"`
	Role           string    `json:"role"`
	Release        string    `json:"release"`
	KeyFingerprint string    `json:"keyFingerprint"`
	QueuePosition  int       `json:"queuePosition"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	Upgrade        *upgrade  `json:"upgrade,omitempty"`
	Delivery       *delivery `json:"delivery,omitempty"`
	// Generation and WaitingFor: in installing, the generation this node
	// was admitted at and the members that have not applied it yet.
	Generation uint64      `json:"generation,omitempty"`
	WaitingFor []memberLag `json:"waitingFor,omitempty"`
}

// memberLag is a member that has not applied this join's generation.
type memberLag struct {
	NodeID            string `json:"nodeId"`
	AppliedGeneration uint64 `json:"appliedGeneration"`
}

// upgrade says which release to fetch and where from ("" = the founder).
type upgrade struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Source string `json:"source"`
}

// delivery is node.yaml as text and the bundle, kept raw so bundle.json
// keeps every field the founder sends, including ones this joiner does
// not know yet (the seed warns of fields silently lost on the way).
type delivery struct {
	NodeYAML string          `json:"nodeYaml"`
	Bundle   json.RawMessage `json:"bundle"`
}

// progressRequest is the body of POST .../progress.
type progressRequest struct {
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
}

const (
	phaseInstalling = "installing"
	phaseDone       = "done"
	phaseFailed     = "failed"
)

// stall says which members a join waits for, as the joiner prints it:
// "waiting for n-abc12def to apply generation 4 (it has 3)".
func stall(generation uint64, lagging []memberLag) string {
	const named = 3
	parts := make([]string, 0, named)
	for i, m := range lagging {
		if i == named {
			break
		}
		parts = append(parts, fmt.Sprintf("%s (it has %d)", m.NodeID, m.AppliedGeneration))
	}
	more := ""
	if len(lagging) > named {
		more = fmt.Sprintf(" and %d more", len(lagging)-named)
	}
	if len(lagging) == 1 {
		return fmt.Sprintf("waiting for %s to apply generation %d (it has %d)", lagging[0].NodeID, generation, lagging[0].AppliedGeneration)
	}
	return fmt.Sprintf("waiting for %s%s to apply generation %d", strings.Join(parts, ", "), more, generation)
}
