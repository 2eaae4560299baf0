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

// ReleaseKey is a file of the founder's release keys (GET
// /v1/admin/release-keys, stratum release keys): a release it signs is
// imported only while it is trusted (SPEC 16.2).
type ReleaseKey struct {
	File    string `json:"file"`
	KeyID   string `json:"keyId,omitempty"`
	Trusted bool   `json:"trusted"`
	// Problem says why a file holds no release public key.
	Problem string `json:"problem,omitempty"`
}

// ReleaseKeys is GET /v1/admin/release-keys' answer (and stratum release
// keys --data's, on a stopped founder): every *.pub file of the
// founder's release keys.
type ReleaseKeys struct {
	Keys []ReleaseKey `json:"keys"`
}

// TrustReleaseKey is POST /v1/admin/release-keys' body: the public key's
// PEM text and the file name to keep it under (NAME.pub; empty: the key
// id's first 16 digits).
type TrustReleaseKey struct {
	Name      string `json:"name"`
	PublicKey string `json:"publicKey"`
}
