package wire

import (
	"encoding/json"
	"time"
)

// The join listener's shapes (SPEC 4.2 to 4.6) and the operator's view of
// a registration.

// Registration states (SPEC 4.3).
const (
	StatePending      = "pending"
	StateNeedsUpgrade = "needs-upgrade"
	StateApproved     = "approved"
	StateDelivering   = "delivering"
	StateInstalling   = "installing"
	StateJoined       = "joined"
	StateRejected     = "rejected"
	StateFailed       = "failed"
)

// States lists every registration state, in the order of the flow.
var States = []string{StatePending, StateNeedsUpgrade, StateApproved, StateDelivering, StateInstalling, StateJoined, StateRejected, StateFailed}

// IsFinal: the state ends a registration; its key needs a new token to
// register again.
func IsFinal(state string) bool {
	return state == StateJoined || state == StateRejected || state == StateFailed
}

// Who chose a management address (SPEC 10.5): the joiner suggested it, or
// the operator set it at approval.
const (
	MgmtIPFromJoiner   = "joiner"
	MgmtIPFromOperator = "operator"
)

// RegisterRequest is the body of POST /v1/join/registrations.
type RegisterRequest struct {
	Token       string `json:"token"`
	Release     string `json:"release"`
	SelfUpgrade bool   `json:"selfUpgrade"`
	Hostname    string `json:"hostname"`
	// MgmtIP is the address the joiner suggests; empty lets the founder
	// or the operator choose.
	MgmtIP    string          `json:"mgmtIp"`
	MachineID string          `json:"machineId"`
	Facts     json.RawMessage `json:"facts,omitempty"`
	// Attestation is present when the joiner has a TPM to prove.
	Attestation *AttestationClaim `json:"attestation,omitempty"`
}

// Phases a joiner reports.
const (
	PhaseInstalling = "installing"
	PhaseDone       = "done"
	PhaseFailed     = "failed"
)

// ProgressRequest is the body of POST /v1/join/registrations/{joinId}/progress.
type ProgressRequest struct {
	Phase   string `json:"phase"`
	Message string `json:"message"`
}

// Upgrade is what a needs-upgrade joiner must do before it is approvable:
// which release to fetch, and where from ("" = the founder).
type Upgrade struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Source string `json:"source"`
}

// Network is one of a node's networks besides management.
type Network struct {
	IP        string `json:"ip" yaml:"ip"`
	Interface string `json:"interface,omitempty" yaml:"interface,omitempty"`
}

// VIPs are the cluster's keepalived service VIPs.
type VIPs struct {
	API             string `json:"api,omitempty" yaml:"api"`
	Postgres        string `json:"postgres,omitempty" yaml:"postgres"`
	OpenBao         string `json:"openBao,omitempty" yaml:"openBao"`
	OvnNb           string `json:"ovnNb,omitempty" yaml:"ovnNb"`
	OvnSb           string `json:"ovnSb,omitempty" yaml:"ovnSb"`
	Vmselect        string `json:"vmselect,omitempty" yaml:"vmselect"`
	FloatingNextHop string `json:"floatingNextHop,omitempty" yaml:"floatingNextHop"`
}

// Empty reports whether no VIP is configured.
func (v VIPs) Empty() bool { return v == VIPs{} }

// Assignment is what the operator gives a node when approving it: the
// body of POST /v1/admin/join/registrations/{joinId}/approve.
type Assignment struct {
	NodeID   string             `json:"nodeId"`
	AZ       string             `json:"az"`
	MgmtIP   string             `json:"mgmtIp"`
	Networks map[string]Network `json:"networks"`
	Labels   map[string]string  `json:"labels"`
}

// Delivery is what an approved joiner receives in its turn (SPEC 4.6).
type Delivery struct {
	NodeYAML string `json:"nodeYaml"`
	Bundle   Bundle `json:"bundle"`
}

// Bundle is the join bundle; field names are the seed's.
type Bundle struct {
	ClusterID    string       `json:"clusterId"`
	Role         string       `json:"role"`
	Nodes        []BundleNode `json:"nodes"`
	ParentDomain string       `json:"parentDomain"`
	Region       string       `json:"region"`
	// DNSUpstreamServers is always present: an empty list is a value
	// (resolve from the root servers), never an omission.
	DNSUpstreamServers []string `json:"dnsUpstreamServers"`
	CABundle           string   `json:"caBundle"`
	NodeCert           string   `json:"nodeCert"`
	NodeKey            string   `json:"nodeKey"`
	// The cluster secrets go by role (SPEC 16.1): a field a role does
	// not receive is absent, never an empty string. The unseal key is a
	// pointer because a control plane of a single-instance OpenBao
	// receives it empty.
	PostgresPassword    string  `json:"postgresPassword,omitempty"`
	AdminEmail          string  `json:"adminEmail,omitempty"`
	AdminPassword       string  `json:"adminPassword,omitempty"`
	OpenBaoToken        string  `json:"openBaoToken,omitempty"`
	OpenBaoNodeToken    string  `json:"openBaoNodeToken,omitempty"`
	AxdnsdEncryptionKey string  `json:"axdnsdEncryptionKey,omitempty"`
	OpenBaoUnsealKey    *string `json:"openBaoUnsealKey,omitempty"`
	Generation          uint64  `json:"generation"`
	// VIPs is absent when none are configured.
	VIPs *VIPs `json:"vips,omitempty"`
	// ControlPlane is the cluster's control-plane build and schema levels,
	// for a control-plane node's control-plane.json (SPEC 19); other
	// roles run none.
	ControlPlane *ControlPlane `json:"controlPlane,omitempty"`
}

// BundleNode is one peer. Networks and labels are always present ({}): a
// joiner must never mistake "none" for "not carried" (seed: traffic
// collapsing onto the management plane, a half-declared topology).
type BundleNode struct {
	NodeID      string             `json:"nodeId"`
	Role        string             `json:"role"`
	AZ          string             `json:"az"`
	MgmtIP      string             `json:"mgmtIp"`
	Networks    map[string]Network `json:"networks"`
	Labels      map[string]string  `json:"labels"`
	BootState   string             `json:"bootState,omitempty"`
	BootPhase   string             `json:"bootPhase,omitempty"`
	BootPhaseMs int64              `json:"bootPhaseMs,omitempty"`
	LastBootMs  int64              `json:"lastBootMs,omitempty"`
}

// Registration is what the joiner's and the operator's views of a
// registration both begin with.
type Registration struct {
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
	// Attestation is present when the joiner claimed a TPM; the
	// challenge in it only in the joiner's view.
	Attestation *AttestationView `json:"attestation,omitempty"`
}

// JoinerView is what the joiner sees of its registration (SPEC 4.3).
type JoinerView struct {
	Registration
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

// OperatorView is the operator's view of a registration (SPEC 4.4):
// never the delivery.
type OperatorView struct {
	Registration
	Hostname string `json:"hostname"`
	MgmtIP   string `json:"mgmtIp"`
	// MgmtIPSource says who chose the address that goes (or went) into
	// the node's certificate: MgmtIPFromJoiner or MgmtIPFromOperator;
	// empty when none.
	MgmtIPSource string          `json:"mgmtIpSource,omitempty"`
	MachineID    string          `json:"machineId"`
	SelfUpgrade  bool            `json:"selfUpgrade"`
	Facts        json.RawMessage `json:"facts"`
	TokenID      string          `json:"tokenId"`
	// Assignment is present once approved.
	Assignment *Assignment `json:"assignment,omitempty"`
	ApprovedBy string      `json:"approvedBy,omitempty"`
	ApprovedAt time.Time   `json:"approvedAt,omitzero"`
	// AutoApproval says what the inventory of expected machines made of
	// the registration: which entry approved it, or why it waits for a
	// person (no entry matches, another role, the entry's node is taken).
	// Empty when the inventory had no say.
	AutoApproval string `json:"autoApproval,omitempty"`
	// Generation is the membership generation the node was admitted at.
	Generation uint64 `json:"generation,omitempty"`
	// WaitingFor is present only in installing: the members that have not
	// applied Generation yet.
	WaitingFor []MemberLag `json:"waitingFor,omitempty"`
}

// MemberView is one member as GET /v1/admin/cluster/members and the
// node's GET /v1/cluster/members list it.
type MemberView struct {
	NodeID            string             `json:"nodeId"`
	Role              string             `json:"role"`
	State             string             `json:"state"`
	Generation        uint64             `json:"generation"`
	AppliedGeneration uint64             `json:"appliedGeneration"`
	MgmtIP            string             `json:"mgmtIp"`
	AZ                string             `json:"az"`
	Networks          map[string]Network `json:"networks"`
	Labels            map[string]string  `json:"labels"`
	JoinedAt          time.Time          `json:"joinedAt"`
	Hostname          string             `json:"hostname,omitempty"`
	// The boot health the founder's prober last saw (SPEC 11); absent
	// while the member has not been probed, or the prober is off.
	BootState   string `json:"bootState,omitempty"`
	BootPhase   string `json:"bootPhase,omitempty"`
	BootPhaseMs int64  `json:"bootPhaseMs,omitempty"`
	LastBootMs  int64  `json:"lastBootMs,omitempty"`
}

// MembersView is the membership with its current generation.
type MembersView struct {
	Generation uint64       `json:"generation"`
	Members    []MemberView `json:"members"`
}

// AppliedRequest is the body of PUT /v1/cluster/members/{nodeId}/applied:
// the generation the node wrote.
type AppliedRequest struct {
	Generation uint64 `json:"generation"`
}

// JoinTokenRequest is the body of POST /v1/admin/join/tokens.
type JoinTokenRequest struct {
	Role string `json:"role"`
	// TTL is a Go duration ("24h") or whole days ("7d"); empty means 24h.
	TTL string `json:"ttl"`
	// Uses is 1..1000; zero means 1.
	Uses        int    `json:"uses"`
	Description string `json:"description"`
}

// JoinToken answers a join token's creation; Token is shown only here.
type JoinToken struct {
	TokenID     string    `json:"tokenId"`
	Token       string    `json:"token"`
	Role        string    `json:"role"`
	ExpiresAt   time.Time `json:"expiresAt"`
	UsesLeft    int       `json:"usesLeft"`
	JoinCommand string    `json:"joinCommand"`
}

// JoinTokenView is a join token as listed: no secret, no hash.
type JoinTokenView struct {
	TokenID     string    `json:"tokenId"`
	Role        string    `json:"role"`
	Description string    `json:"description"`
	Uses        int       `json:"uses"`
	UsesLeft    int       `json:"usesLeft"`
	State       string    `json:"state"` // active, expired, revoked, used-up
	CreatedBy   string    `json:"createdBy"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	RevokedAt   time.Time `json:"revokedAt,omitzero"`
}

// NodeLeafRenewal is the body of POST /v1/cluster/nodes/{nodeId}/leaf: a
// node asks, with its current transport leaf, for a new one certifying
// PublicKey (PEM "PUBLIC KEY", ECDSA P-256), whose private key it keeps.
type NodeLeafRenewal struct {
	PublicKey string `json:"publicKey"`
}

// NodeLeaf answers a renewal: the new leaf (PEM) and when it expires. It
// counts beside the old one until the node first uses it; from then on
// the old one no longer counts.
type NodeLeaf struct {
	Certificate string    `json:"certificate"`
	NotAfter    time.Time `json:"notAfter"`
}
