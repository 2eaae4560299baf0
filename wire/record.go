package wire

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
	// a node whose packages come from a package manager.
	ImageMode bool `json:"imageMode"`
	// PackageManager is the package manager found on a package-mode host
	// ("dpkg", "rpm"); absent when none answered or in image mode.
	PackageManager string        `json:"packageManager,omitempty"`
	OS             *OS           `json:"os,omitempty"`
	Bootc          *Bootc        `json:"bootc,omitempty"`
	ControlPlane   *ControlPlane `json:"controlPlane,omitempty"`
	HostBinaries   *HostBinaries `json:"hostBinaries,omitempty"`
	// Extensions is null when not read (no systemd-sysext), [] when it
	// ran and found none.
	Extensions []Extension `json:"extensions"`
	Packages   []Package   `json:"packages,omitempty"`
	Pins       []Pin       `json:"pins,omitempty"`
	Unpinned   []Unpinned  `json:"unpinned,omitempty"`
	Payloads   []Payload   `json:"payloads,omitempty"`
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

// ControlPlane is a control plane's build and schema levels: the founder's
// own in a release set, each node's in its Record.
type ControlPlane struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// SchemaLevel is the newest database migration this build carries.
	// Absent when not known.
	SchemaLevel *int `json:"schemaLevel,omitempty"`
	// CompatSchemaLevel is the oldest schema level whose control plane
	// still runs against this build's schema.
	CompatSchemaLevel *int `json:"compatSchemaLevel,omitempty"`
	// DatabaseSchemaLevel is the database's schema level, above SchemaLevel
	// when this build runs against a newer one.
	DatabaseSchemaLevel *int `json:"databaseSchemaLevel,omitempty"`
}

// HostSource says where a node's host binaries come from.
type HostSource string

const (
	// SourceOSImage: the binaries change with the OS image.
	SourceOSImage HostSource = "os-image"
	// SourceOverlay: switched in live from a release, under /var.
	SourceOverlay HostSource = "overlay"
	// SourceControlPlaneImage: installed from the control plane's image.
	SourceControlPlaneImage HostSource = "control-plane-image"
)

// The two HostBinaries.Commit values that are not a commit.
const (
	CommitMixed   = "mixed"
	CommitUnknown = "unknown"
)

// HostBinaries are the Stratum binaries installed on the host.
type HostBinaries struct {
	Source HostSource `json:"source"`
	// Commit is the commit the binaries share, CommitMixed, or CommitUnknown.
	Commit string `json:"commit"`
	// Stale: the binaries are not the build the node should run (Want), or
	// some cannot report their commit.
	Stale bool `json:"stale"`
	// Want is the commit the binaries should be at. Empty when it is not
	// known, or while an upgrade runs.
	Want string `json:"want"`
}

// Extension is one system extension (host packages shipped as a signed
// sysext): every image systemd-sysext finds and every merged one.
type Extension struct {
	Name string `json:"name"`
	// Version is the merged extension's version (its main package's
	// version-release).
	Version string `json:"version,omitempty"`
	// Merged: merged into /usr now.
	Merged bool `json:"merged"`
	// SysextLevel is the OS level (SYSEXT_LEVEL) the extension is built for.
	SysextLevel string `json:"sysextLevel,omitempty"`
	// Release is the release whose extension set the image is linked from.
	Release string `json:"release,omitempty"`
	// RootHash is the image's dm-verity root hash, as that release's
	// manifest records it (hex).
	RootHash string `json:"rootHash,omitempty"`
}

// Package is one installed host package Stratum depends on; a node lists at
// most one per component.
type Package struct {
	Component string `json:"component"`
	Name      string `json:"name"`
	Version   string `json:"version"`
}

// PinState compares a pinned image with what runs.
type PinState string

const (
	// PinCurrent: every container of this image runs the pin.
	PinCurrent PinState = "current"
	// PinDiffers: a container runs another image (see Pin.Running).
	PinDiffers PinState = "differs"
	// PinAbsent: nothing of this image runs here, which is normal for an
	// image the node's role or the install's profile does not run.
	PinAbsent PinState = "absent"
	// PinSelf: the control plane's own image. Its pin names the build
	// before it, so it is compared between nodes, not with the pin.
	PinSelf PinState = "self"
)

// Pin is one image the node's control plane pins, against what runs.
type Pin struct {
	Name string `json:"name"`
	// Pinned is the pinned reference; empty for the control plane's own
	// image (state self): an image cannot embed its own digest.
	Pinned string   `json:"pinned"`
	State  PinState `json:"state"`
	// Running is what runs in place of the pin, or the control plane's own
	// image (self).
	Running string `json:"running,omitempty"`
	// Containers counts the running containers of this image.
	Containers int `json:"containers"`
}

// Unpinned is an image running containers use that no pin names.
type Unpinned struct {
	Image      string `json:"image"`
	Containers int    `json:"containers"`
}

// Payload is a release payload loaded onto the node.
type Payload struct {
	Release string `json:"release"`
	// SHA256 is the payload manifest's sha256, 64 lowercase hex digits.
	SHA256 string `json:"sha256"`
}

// Storage is what the node keeps under /var/lib/stratum/upgrade.
type Storage struct {
	Releases []StoredRelease `json:"releases,omitempty"`
	// Leftovers are directories there that no stored release claims.
	Leftovers []StoredDir `json:"leftovers,omitempty"`
}

// StoredRelease is one release kept under /var/lib/stratum/upgrade.
type StoredRelease struct {
	Release string `json:"release"`
	// Complete: its fetch finished. A release that is not was interrupted.
	Complete bool `json:"complete"`
	// Installed: the release the node was installed with.
	Installed bool `json:"installed,omitempty"`
	// Path is its manifest and system extensions: a directory relative to
	// /var/lib/stratum/upgrade, e.g. releases/0.2.0.
	Path string `json:"path,omitempty"`
	// OS is its stratum-os layout, shared by the releases of one OS: a
	// directory relative to /var/lib/stratum/upgrade, e.g. os/3f1c0d77.
	OS string `json:"os,omitempty"`
}

// StoredDir is a directory under /var/lib/stratum/upgrade, relative to it.
type StoredDir struct {
	Path string `json:"path"`
}

// RecordRequest is the body of PUT /v1/cluster/nodes/{nodeId}/release: what
// an agent (or the founder, for itself) sends.
type RecordRequest struct {
	// RunningRelease is the release the node runs (semver), empty when it
	// does not know.
	RunningRelease string `json:"runningRelease"`
	Release        Record `json:"release"`
}
