package tpm

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"stratum/crypto"
)

// SealVerified seals secret to the TPM at tpmPath (see Open) under pcrs
// (see Seal) and unseals the blob once before returning it, so a caller
// that deletes its only other copy of the secret next knows the TPM will
// give it back. Without a TPM the error wraps ErrNoTPM.
func SealVerified(tpmPath string, pcrs []int, secret []byte) (blob []byte, err error) {
	t, err := Open(tpmPath)
	if err != nil {
		return nil, err
	}
	defer closeTPM(t, &err)
	blob, err = Seal(t, secret, pcrs)
	if err != nil {
		return nil, err
	}
	back, err := Unseal(t, blob)
	if err != nil {
		return nil, fmt.Errorf("the TPM does not unseal what it just sealed: %w", err)
	}
	defer clear(back)
	if subtle.ConstantTimeCompare(back, secret) != 1 {
		return nil, errors.New("the TPM unsealed something other than what it sealed")
	}
	return blob, nil
}

// SealToFile seals secret (verified, see SealVerified) and writes the blob
// to out atomically with mode 0600, creating out's directory (0700) if
// needed. Without a TPM the error wraps ErrNoTPM and nothing is written.
func SealToFile(tpmPath string, pcrs []int, secret []byte, out string) error {
	blob, err := SealVerified(tpmPath, pcrs, secret)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return err
	}
	if err := crypto.WriteFileAtomic(out, blob, 0o600); err != nil {
		return fmt.Errorf("write sealed blob: %w", err)
	}
	return nil
}

// UnsealFile reads a blob written by SealToFile and unseals it with the TPM
// at tpmPath.
func UnsealFile(tpmPath, in string) (secret []byte, err error) {
	blob, err := readBlobFile(in)
	if err != nil {
		return nil, err
	}
	t, err := Open(tpmPath)
	if err != nil {
		return nil, err
	}
	defer closeTPM(t, &err)
	secret, err = Unseal(t, blob)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	return secret, nil
}

// SealedPCRs names the PCRs the blob in file in is sealed to, without a
// TPM, so a caller can say which policy a recovery has to re-create.
func SealedPCRs(in string) ([]int, error) {
	data, err := readBlobFile(in)
	if err != nil {
		return nil, err
	}
	b, err := parseSealedBlob(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	return b.pcrs, nil
}

func readBlobFile(path string) ([]byte, error) { return crypto.ReadFileLimit(path, maxBlobSize) }

func closeTPM(t io.Closer, err *error) {
	if cerr := t.Close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("close TPM: %w", cerr))
	}
}
