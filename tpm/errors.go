package tpm

import "errors"

// Callers branch on these sentinels (errors.Is): the joiner refuses to store
// an unseal key when there is no TPM, and whoever unseals tells the operator
// how to recover when the PCR policy no longer holds. The recovery path
// depends on what was sealed (an OpenBao unseal key, the founder's data
// key), so these errors name what broke and the caller adds the way out.
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

// NeedsRecovery reports whether err means the TPM is there and working but
// will never release this blob again: the secret must come back another way.
func NeedsRecovery(err error) bool {
	return errors.Is(err, ErrPolicyMismatch) || errors.Is(err, ErrWrongTPM)
}
