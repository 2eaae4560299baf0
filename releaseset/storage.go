package releaseset

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
