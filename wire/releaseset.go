package wire

import "time"

// ReleaseSet is the answer of GET /v1/admin/upgrades/release: every node's
// release, and where the nodes differ from each other (skew) or from their
// own release (drift). Lists are never null, so clients can range over
// them without a check.
type ReleaseSet struct {
	// Node is the node whose control plane answered (the founder).
	Node string `json:"node"`
	// ControlPlane is the answering control plane's own build.
	ControlPlane ControlPlane `json:"controlPlane"`
	// RunningRelease is the release the cluster runs: its oldest node's.
	// Empty when it is not known.
	RunningRelease string `json:"runningRelease"`
	// AdmissionRelease is the release joiners are admitted on (SPEC 17:
	// who is behind); absent when not known.
	AdmissionRelease string     `json:"admissionRelease,omitempty"`
	Summary          SetSummary `json:"summary"`
	// Nodes are the members, in join order.
	Nodes []SetNode `json:"nodes"`
}

// SetSummary says whether the cluster is consistent and why not.
type SetSummary struct {
	// Recent counts the nodes whose record is at most ten minutes old.
	Recent int `json:"recent"`
	// Consistent: every node reported recently, no field differs between
	// nodes, and none drifts from its release.
	Consistent bool `json:"consistent"`
	// Skew lists each field whose value differs between the recent nodes.
	Skew []Skew `json:"skew"`
	// Drift lists what a node runs other than its release says, and the
	// nodes that did not report.
	Drift []Drift `json:"drift"`
	// Behind lists the nodes whose runningRelease is older than the
	// admission release, over every node (nodes[] may be a page of them),
	// in member order: the first MaxBehindListed. BehindCount counts them
	// all. A node behind makes the set not consistent.
	Behind      []BehindNode `json:"behind"`
	BehindCount int          `json:"behindCount"`
}

// MaxBehindListed bounds summary.behind: a cluster half way through an
// upgrade has thousands of nodes behind, and the summary is read often.
const MaxBehindListed = 100

// BehindNode is a node on a release older than the admission release.
type BehindNode struct {
	NodeID         string `json:"nodeId"`
	RunningRelease string `json:"runningRelease"`
}

// The skew fields, in the order Skew lists them; package skews follow as
// SkewPackagePrefix + component.
const (
	// SkewRunningRelease: the nodes run different releases.
	SkewRunningRelease = "runningRelease"
	SkewOS             = "os"
	SkewImageMode      = "imageMode"
	SkewKernel         = "kernel"
	SkewControlPlane   = "controlPlane"
	SkewSchema         = "schema"
	SkewHostBinaries   = "hostBinaries"
	SkewExtensions     = "extensions"
	SkewPackagePrefix  = "package:"
)

// Skew is one field whose value differs between the recent nodes.
type Skew struct {
	Field  string      `json:"field"`
	Values []SkewValue `json:"values"`
}

// SkewValue is one value of a skewed field and the nodes that have it.
type SkewValue struct {
	// Value is what is compared (a digest, a commit, a level...).
	Value string `json:"value"`
	// Display is a readable form of the value, such as a version for a
	// digest.
	Display string `json:"display"`
	// Nodes have this value, in member order.
	Nodes []string `json:"nodes"`
}

// DriftKind classifies a drift finding.
type DriftKind string

const (
	// DriftReport: the node never recorded its release, or its record is
	// stale.
	DriftReport DriftKind = "report"
	// DriftHost: stale host binaries, or a staged OS deployment.
	DriftHost DriftKind = "host"
	// DriftPin: an image that is not its pin, or an unpinned image with
	// running containers.
	DriftPin DriftKind = "pin"
)

// Drift is one finding. Which fields are set depends on Kind:
//
//   - report: Recorded and Stale (always both), RecordedAt when stale.
//   - host: Field "hostBinaries" with Source, Commit and Want; or Field
//     "bootc.staged" with Image, Digest and Version of the staged
//     deployment.
//   - pin: Field "pins[i]" with Name, Pinned, Running and Containers; or
//     Field "unpinned[i]" with Image and Containers.
//
// Field is the path of the finding in the node's release, so a client can
// point at it.
type Drift struct {
	NodeID string    `json:"nodeId"`
	Kind   DriftKind `json:"kind"`

	Recorded   *bool      `json:"recorded,omitempty"`
	Stale      *bool      `json:"stale,omitempty"`
	RecordedAt *time.Time `json:"recordedAt,omitempty"`

	Field      string     `json:"field,omitempty"`
	Source     HostSource `json:"source,omitempty"`
	Commit     string     `json:"commit,omitempty"`
	Want       string     `json:"want,omitempty"`
	Image      string     `json:"image,omitempty"`
	Digest     string     `json:"digest,omitempty"`
	Version    string     `json:"version,omitempty"`
	Name       string     `json:"name,omitempty"`
	Pinned     string     `json:"pinned,omitempty"`
	Running    string     `json:"running,omitempty"`
	Containers *int       `json:"containers,omitempty"`
}

// SetNode is one member and its release.
type SetNode struct {
	NodeID string `json:"nodeId"`
	// Hostname is the member's host name (what it reported when it
	// registered, the founder's own at init); absent when not known.
	Hostname string `json:"hostname,omitempty"`
	// Recorded is false when the node has never recorded its release.
	Recorded bool `json:"recorded"`
	// Stale: the record is older than ten minutes.
	Stale bool `json:"stale"`
	// RunningRelease is the release the node runs: the one it recorded,
	// else the cluster's (ReleaseSet.RunningRelease); empty when neither is known.
	RunningRelease string `json:"runningRelease"`
	// Behind: the node runs a release older than the admission release.
	Behind bool `json:"behind,omitempty"`
	// Release is the node's last record; absent when it never recorded.
	Release *Record `json:"release,omitempty"`
}
