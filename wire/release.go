package wire

import "time"

// ImportedRelease describes a release the founder imported (GET
// /v1/admin/releases, stratum release list).
type ImportedRelease struct {
	Release        string `json:"release"`
	ManifestSHA256 string `json:"manifestSha256"`
	// ImportID tells one import of a release from the next, so a chunk
	// mismatch seen while a re-import swaps the tree is not blamed on the
	// new files.
	ImportID     string    `json:"importId"`
	ImportedAt   time.Time `json:"importedAt"`
	CreatedAt    time.Time `json:"createdAt"`
	UpgradesFrom []string  `json:"upgradesFrom"`
	Files        int       `json:"files"` // listed files, payload files excluded
	Bytes        int64     `json:"bytes"`
	// SignerKeyIDs are the founder's release keys whose signature over
	// the manifest verified at import.
	SignerKeyIDs []string `json:"signerKeyIds,omitempty"`
	// Corrupt lists the files found not as imported, while serving or by
	// the start-up check; Missing the files not there at all (filled on
	// read).
	Corrupt []string `json:"corrupt,omitempty"`
	Missing []string `json:"missing,omitempty"`
	// Status is verified, checking (the start-up check has not reached
	// it), missing or corrupt (ReleaseVerified...); Fix is the command that
	// repairs a missing or corrupt release.
	Status string `json:"status,omitempty"`
	Fix    string `json:"fix,omitempty"`
}

// Status values of an imported release.
const (
	ReleaseVerified = "verified"
	ReleaseChecking = "checking"
	ReleaseMissing  = "missing"
	ReleaseCorrupt  = "corrupt"
)
