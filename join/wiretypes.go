package join

import "stratum/wire"

// The join listener's shapes live in package wire, shared with the joiner
// and the agent; these names let the domain code say them plainly.
type (
	RegisterRequest = wire.RegisterRequest
	ProgressRequest = wire.ProgressRequest
	Upgrade         = wire.Upgrade
	Assignment      = wire.Assignment
	Delivery        = wire.Delivery
	Bundle          = wire.Bundle
	BundleNode      = wire.BundleNode
	JoinerView      = wire.JoinerView
	OperatorView    = wire.OperatorView
	MemberView      = wire.MemberView
	MembersView     = wire.MembersView
	MemberLag       = wire.MemberLag

	CreateTokenRequest = wire.JoinTokenRequest
	CreatedToken       = wire.JoinToken
	TokenView          = wire.JoinTokenView
)

// Registration states (SPEC 4.3), phases a joiner reports, and who chose
// a management address (SPEC 10.5).
const (
	StatePending      = wire.StatePending
	StateNeedsUpgrade = wire.StateNeedsUpgrade
	StateApproved     = wire.StateApproved
	StateDelivering   = wire.StateDelivering
	StateInstalling   = wire.StateInstalling
	StateJoined       = wire.StateJoined
	StateRejected     = wire.StateRejected
	StateFailed       = wire.StateFailed

	PhaseInstalling = wire.PhaseInstalling
	PhaseDone       = wire.PhaseDone
	PhaseFailed     = wire.PhaseFailed

	MgmtIPFromJoiner   = wire.MgmtIPFromJoiner
	MgmtIPFromOperator = wire.MgmtIPFromOperator
)

// States lists every state, for filters and documentation.
var States = wire.States
