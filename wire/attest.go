package wire

import "time"

// TPM attestation of a joiner (zero-touch enrollment). The bytes are TPM
// structures in their TPM wire encoding (go-tpm's tpm2.Marshal), carried
// as base64 by encoding/json.

// AttestationClaim is what a joiner with a TPM adds to its registration:
// its endorsement key, the manufacturer's certificate of it when the TPM
// holds one, and an attestation key it created on the same TPM.
type AttestationClaim struct {
	// EKCert is the DER EK certificate read from the TPM's NV index;
	// empty when the TPM holds none.
	EKCert []byte `json:"ekCert,omitempty"`
	// EKPublic is the EK's TPMT_PUBLIC.
	EKPublic []byte `json:"ekPublic"`
	// AKPublic is the attestation key's TPMT_PUBLIC: a restricted signing
	// key that never leaves the TPM.
	AKPublic []byte `json:"akPublic"`
}

// AttestationChallenge is the founder's credential challenge, shown in the
// joiner's view while the attestation is "challenged": only the TPM that
// holds the EK can recover the secret, and only for the AK it names.
type AttestationChallenge struct {
	CredentialBlob  []byte `json:"credentialBlob"`
	EncryptedSecret []byte `json:"encryptedSecret"`
	// Nonce is fresh per challenge; the quote's qualifying data binds it
	// and the registration key.
	Nonce []byte `json:"nonce"`
}

// AttestationProof is the body of POST
// /v1/join/registrations/{joinId}/attestation.
type AttestationProof struct {
	// Secret is what ActivateCredential recovered.
	Secret []byte `json:"secret"`
	// Quote is the TPMS_ATTEST the AK signed; its extraData is
	// QualifyingData(nonce, key pin).
	Quote []byte `json:"quote"`
	// Signature is the quote's TPMT_SIGNATURE.
	Signature []byte `json:"signature"`
}

// Attestation states.
const (
	AttestationChallenged = "challenged" // the joiner has a challenge to answer
	AttestationVerified   = "verified"   // the TPM proved the EK, the AK and the key
	AttestationFailed     = "failed"     // a proof was refused; a person decides
)

// AttestationView is what the joiner and the operator see of a
// registration's attestation.
type AttestationView struct {
	State string `json:"state"`
	// Reason says why a proof was refused, or why a verified machine still
	// waits for a person (no inventory entry, another role...).
	Reason string `json:"reason,omitempty"`
	// EKSHA256 is hex SHA-256 of the EK's SubjectPublicKeyInfo (DER);
	// EKCertSHA256 of the EK certificate (DER), when one was presented.
	EKSHA256     string `json:"ekSha256"`
	EKCertSHA256 string `json:"ekCertSha256,omitempty"`
	// EKChain is "verified" when the certificate chains to the founder's
	// manufacturer CA pool, "none" when no pool or no certificate.
	EKChain string `json:"ekChain,omitempty"`
	// Challenge is present, to the joiner only, while challenged.
	Challenge *AttestationChallenge `json:"challenge,omitempty"`
	// InventoryNodeID is the inventory entry the machine matched.
	InventoryNodeID string    `json:"inventoryNodeId,omitempty"`
	VerifiedAt      time.Time `json:"verifiedAt,omitzero"`
}

// InventoryMatch says how an expected machine is recognised: by its TPM
// (the EK public key's or the EK certificate's SHA-256, hex) or, weaker,
// by its registration key's fingerprint (sha256:<hex>, as the joins list
// shows it). Exactly one is set.
type InventoryMatch struct {
	EKSHA256       string `json:"ekSha256,omitempty" yaml:"ekSha256,omitempty"`
	EKCertSHA256   string `json:"ekCertSha256,omitempty" yaml:"ekCertSha256,omitempty"`
	KeyFingerprint string `json:"keyFingerprint,omitempty" yaml:"keyFingerprint,omitempty"`
}

// InventoryEntry is one expected machine and its full assignment.
type InventoryEntry struct {
	Match    InventoryMatch     `json:"match" yaml:"match"`
	NodeID   string             `json:"nodeId" yaml:"nodeId"`
	Role     string             `json:"role" yaml:"role"`
	Hostname string             `json:"hostname,omitempty" yaml:"hostname,omitempty"`
	MgmtIP   string             `json:"mgmtIp" yaml:"mgmtIp"`
	AZ       string             `json:"az" yaml:"az"`
	Networks map[string]Network `json:"networks" yaml:"networks"`
	Labels   map[string]string  `json:"labels" yaml:"labels"`
}

// Inventory is the document `stratum inventory apply -f FILE` sends (PUT
// /v1/admin/inventory): the whole list of expected machines, replacing
// the one before.
type Inventory struct {
	Machines []InventoryEntry `json:"machines" yaml:"machines"`
}

// InventoryEntryView is an entry as listed, with what became of it.
type InventoryEntryView struct {
	InventoryEntry
	// State: "expected" (nothing matched yet), "joining" (a matching
	// registration is under way), "member" (the node id is a member).
	State  string `json:"state"`
	JoinID string `json:"joinId,omitempty"`
}

// InventoryView answers GET /v1/admin/inventory.
type InventoryView struct {
	Machines  []InventoryEntryView `json:"machines"`
	UpdatedAt time.Time            `json:"updatedAt,omitzero"`
	UpdatedBy string               `json:"updatedBy,omitempty"`
}
