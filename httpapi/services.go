package httpapi

import (
	"context"
	"crypto/ecdsa"
	"time"

	"stratum/iam"
	"stratum/join"
	"stratum/releaseset"
	"stratum/store"
	"stratum/wire"
)

// The handlers depend on these narrow views of the domain services, not
// on the services themselves: a handler sees only the calls its
// endpoints make, and a test can stand in for any one of them.

// Identity establishes who is asking and serves logins, API tokens and
// sessions (iam.Service).
type Identity interface {
	Authenticate(bearer string) (iam.Principal, error)
	Login(ctx context.Context, email, password, source string) (wire.LoginResponse, error)
	ChangePassword(ctx context.Context, p iam.Principal, req wire.PasswordChange) error
	Logout(by iam.Principal) error
	CreateToken(by iam.Principal, req wire.CreateTokenRequest) (secret string, view wire.TokenView, err error)
	ListTokens() ([]wire.TokenView, error)
	RevokeToken(by iam.Principal, id string) error
	ListSessions() ([]wire.TokenView, error)
	RevokeSession(by iam.Principal, id string) error
}

// NodeLeaves decides whether a CA-verified client certificate may act as
// its node (cluster.NodeLeaves).
type NodeLeaves interface {
	CheckNodeLeaf(nodeID, serialHex string) error
}

// AuditLog reads the hash-chained audit log (store.AuditReader).
type AuditLog interface {
	Events(after uint64, limit int) ([]wire.AuditEvent, error)
	Verify() (wire.AuditVerdict, error)
}

// Health is the founder's store as /healthz and /version see it.
type Health interface {
	// Ping fails when the store does not answer.
	Ping() error
	// Schema is the store's schema level.
	Schema() int
	// Degraded lists the database sessions that are not founders holding
	// the cluster's locks (SPEC 16.7), for /readyz.
	Degraded() []store.ForeignHolder
}

// JoinAdmin is the operator's side of joining: tokens, the join list and
// its decisions, membership (join.Service).
type JoinAdmin interface {
	CreateToken(by iam.Principal, req wire.JoinTokenRequest) (wire.JoinToken, error)
	ListTokens() ([]wire.JoinTokenView, error)
	RevokeToken(by iam.Principal, tokenID string) error
	WaitList(ctx context.Context, state, index string, wait time.Duration) ([]wire.OperatorView, string, error)
	Get(joinID string) (wire.OperatorView, error)
	Approve(by iam.Principal, joinID string, a wire.Assignment) (wire.OperatorView, error)
	Reject(by iam.Principal, joinID, reason string) (wire.OperatorView, error)
	Cancel(by iam.Principal, joinID, reason string) (wire.OperatorView, error)
	Members() (wire.MembersView, error)
	RemoveMember(by iam.Principal, nodeID, reason string) (wire.MemberView, error)
	ReplaceMember(by iam.Principal, nodeID, joinID, reason string) (wire.OperatorView, error)
	ApplyInventory(by iam.Principal, doc wire.Inventory) (wire.InventoryView, error)
	Inventory() (wire.InventoryView, error)
	WaitMembers(ctx context.Context, nodeID string, generation uint64, wait time.Duration) (join.NodeMembers, error)
	Applied(nodeID string, generation uint64) (wire.MemberView, error)
	RenewNodeLeaf(nodeID, presentedSerial string, pub *ecdsa.PublicKey) (wire.NodeLeaf, error)
}

// Joiners is the joiner's side, every call keyed by the client
// certificate's pin (join.Service).
type Joiners interface {
	Register(keyPin string, req wire.RegisterRequest) (view wire.JoinerView, created bool, err error)
	Progress(keyPin, joinID string, req wire.ProgressRequest) (wire.JoinerView, error)
	Attest(keyPin, joinID string, proof wire.AttestationProof) (wire.JoinerView, error)
	OfferedRelease(keyPin, joinID string) (string, error)
	Park(keyPin, joinID, lastState string, wait time.Duration, ready <-chan struct{}, answer func(wire.JoinerView, error)) (first wire.JoinerView, end func(), err error)
	Wait(ctx context.Context, keyPin, joinID, lastState string, wait time.Duration) (wire.JoinerView, error)
}

// ReleaseSet is the cluster's release set (releaseset.Service).
type ReleaseSet interface {
	Answer() (*releaseset.Answer, error)
	SummaryAnswer() (*releaseset.Answer, error)
	Page(after string, limit int) (*releaseset.Answer, error)
	SetAdmission(actor string, req wire.SetAdmissionRequest) (wire.AdmissionView, error)
	RecordDecoded(actor, nodeID string, req releaseset.Request) error
}
