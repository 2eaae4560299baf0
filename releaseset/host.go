package releaseset

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
