package joiner

import (
	"encoding/json"
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
