package tpm

import "errors"

// Callers branch on these sentinels (errors.Is): the joiner refuses to store
// an unseal key when there is no TPM, and the boot unseal service tells the
// operator how to recover when the PCR policy no longer holds.
var (
	// ErrNoTPM means there is no TPM at the requested path.
	ErrNoTPM = errors.New("no TPM found")
	// ErrPolicyMismatch means the PCRs no longer hold the values the secret
	// was sealed to, so the TPM refuses to release it.
	ErrPolicyMismatch = errors.New("TPM PCR policy mismatch")
	// ErrWrongTPM means the blob was sealed by another TPM, or this TPM's
	// owner hierarchy was cleared since: the storage root key is different.
	ErrWrongTPM = errors.New("sealed by a different TPM (or the TPM was cleared)")
)

// recoveryHint names the way out for an operator whose sealed key no longer
// opens; it is the same whatever broke the seal.
const recoveryHint = "re-deliver the unseal key from the cluster, or re-seal it with `stratum tpm seal`"
