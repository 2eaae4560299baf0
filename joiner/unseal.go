package joiner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"stratum/crypto"
	"stratum/tpm"
)

// The two places the unseal key may end up: sealed to the TPM (always,
// when there is one), or in plaintext only under --insecure-store-unseal-key.
const (
	unsealSealedFile = "openbao-unseal.tpm"
	unsealPlainFile  = "openbao-unseal.key"
)

// storeUnsealKey seals the OpenBao unseal key to this machine's TPM under
// the PCR policy (the boot-time unseal service opens it with `stratum tpm
// unseal --in FILE`). The key is never written in plaintext, except when
// there is no TPM at all and the operator said --insecure-store-unseal-key:
// that flag covers a machine without a TPM, not a TPM that fails, since a
// broken TPM falling back to plaintext would be a silent downgrade.
func (j *joiner) storeUnsealKey(dir, key string) error {
	sealed := filepath.Join(dir, unsealSealedFile)
	plain := filepath.Join(dir, unsealPlainFile)
	if key == "" {
		// Single-instance OpenBao or a Postgres replica: nothing to keep,
		// and a key from an earlier delivery must not linger.
		return removeAll(sealed, plain)
	}
	secret := []byte(key)
	defer clear(secret)
	err := tpm.SealToFile(j.cfg.TPMPath, j.cfg.PCRs, secret, sealed)
	switch {
	case err == nil:
		j.log.printf("sealed the OpenBao unseal key to the TPM at %s (PCRs %v) into %s", j.cfg.TPMPath, j.cfg.PCRs, sealed)
		return removeAll(plain)
	case errors.Is(err, tpm.ErrNoTPM) && j.cfg.InsecureStoreUnsealKey:
		if err := crypto.WriteFileAtomic(plain, secret, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", plain, err)
		}
		j.log.printf("WARNING: no TPM (%v): the OpenBao unseal key is stored IN PLAINTEXT in %s (mode 0600) because of --insecure-store-unseal-key; anyone with this disk can unseal the cluster's OpenBao", err, plain)
		return removeAll(sealed)
	case errors.Is(err, tpm.ErrNoTPM):
		return fmt.Errorf("the cluster delivered an OpenBao unseal key and there is no TPM to seal it to (%v); it is never stored in plaintext: give --tpm with this machine's TPM, or accept plaintext storage with --insecure-store-unseal-key", err)
	default:
		return fmt.Errorf("seal the OpenBao unseal key to the TPM at %s: %w", j.cfg.TPMPath, err)
	}
}

func removeAll(paths ...string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}
