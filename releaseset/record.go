package releaseset

import "time"

// Record is one node's release as its own control plane recorded it: the
// seed's "release" object. Pointers mark the parts a node may not know
// (absent, or null where the seed says null); slices are omitted when empty
// because an empty list and a missing one mean the same thing here.
type Record struct {
	// RecordedAt is when the founder received the record. The founder
	// stamps it; a value in a request body is ignored.
	RecordedAt time.Time `json:"recordedAt" strictjson:"ignore"`
	// HostReportedAt is when the node collected the host facts; null (not
	// absent) when it has not reported them, as the seed says.
	HostReportedAt *time.Time `json:"hostReportedAt"`
	// ImageMode is true on a node booted from a stratum-os image, false on
	// a node whose packages come from dnf.
	ImageMode    bool          `json:"imageMode"`
	OS           *OS           `json:"os,omitempty"`
	Bootc        *Bootc        `json:"bootc,omitempty"`
	ControlPlane *ControlPlane `json:"controlPlane,omitempty"`
	HostBinaries *HostBinaries `json:"hostBinaries,omitempty"`
	Extensions   []Extension   `json:"extensions,omitempty"`
	Packages     []Package     `json:"packages,omitempty"`
	Pins         []Pin         `json:"pins,omitempty"`
	Unpinned     []Unpinned    `json:"unpinned,omitempty"`
	Payloads     []Payload     `json:"payloads,omitempty"`
	// Stored is what the node keeps under /var/lib/stratum/upgrade; null
	// when it was not read.
	Stored *Storage `json:"stored"`
}

// OS is os-release and the kernel. The seed's "stratum-os release, on an
// image-mode node" is ImageVersion (os-release IMAGE_VERSION, which only a
// stratum-os image sets); the field that "identifies the base" is
// BaseDigest, a digest like its sibling KernelArgsDigest.
type OS struct {
	PrettyName string `json:"prettyName"`
	ID         string `json:"id"`
	VersionID  string `json:"versionId"`
	// ImageVersion is the stratum-os release, on an image-mode node.
	ImageVersion string `json:"imageVersion,omitempty"`
	BuildID      string `json:"buildId,omitempty"`
	// BaseDigest identifies the base (kernel, base packages, bootc base):
	// only a change of it needs a reboot. Empty on an image that predates it.
	BaseDigest string `json:"baseDigest"`
	// KernelArgsDigest identifies the kernel arguments the booted image
	// declares (its bootc kargs.d files). Empty on a node whose host-helper
	// predates it.
	KernelArgsDigest string `json:"kernelArgsDigest"`
	Kernel           string `json:"kernel"`
}

// Bootc is the OS deployments, on an image-mode node.
type Bootc struct {
	Booted *Deployment `json:"booted,omitempty"`
	// Staged is the deployment the next boot switches to, if one is staged.
	Staged *Deployment `json:"staged,omitempty"`
	// Rollback is the previous deployment, kept to roll back to.
	Rollback *Deployment `json:"rollback,omitempty"`
}

// Deployment is one bootc deployment. Names follow `bootc status`.
type Deployment struct {
	// Image is the reference the deployment was installed or switched from.
	Image     string `json:"image"`
	Transport string `json:"transport"`
	// Digest is the OS image's manifest digest (sha256:<64 hex>).
	Digest string `json:"digest"`
	// Version is the image's version label.
	Version      string `json:"version,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	// Timestamp is when the image was built, as the image says.
	Timestamp *time.Time `json:"timestamp,omitempty"`
	// SoftRebootCapable: a switch to this deployment can use a soft reboot
	// (the kernel is unchanged). A pointer so "false" and "not known" stay
	// apart.
	SoftRebootCapable *bool `json:"softRebootCapable,omitempty"`
}
