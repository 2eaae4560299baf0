package tpm

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// Unseal returns the secret in blob if the TPM t is the one that sealed it
// and the PCRs still hold the values it was sealed to. A PCR change gives
// an error wrapping ErrPolicyMismatch, another TPM one wrapping ErrWrongTPM.
func Unseal(t transport.TPM, blob []byte) (secret []byte, err error) {
	b, err := parseSealedBlob(blob)
	if err != nil {
		return nil, err
	}
	k, err := createSRK(t)
	if err != nil {
		return nil, err
	}
	defer deferFlush(t, k.handle, &err)
	if !bytes.Equal(k.name.Buffer, b.srkName) {
		return nil, fmt.Errorf("%w: this TPM's storage root key differs from the one the blob was sealed under", ErrWrongTPM)
	}

	loaded, err := tpm2.Load{
		ParentHandle: tpm2.NamedHandle{Handle: k.handle, Name: k.name},
		InPrivate:    tpm2.TPM2BPrivate{Buffer: b.private},
		InPublic:     tpm2.BytesAs2B[tpm2.TPMTPublic](b.public),
	}.Execute(t)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCIntegrity) {
			return nil, fmt.Errorf("%w: the TPM rejects the sealed object's integrity (%v)", ErrWrongTPM, err)
		}
		return nil, fmt.Errorf("load TPM sealed object: %w", err)
	}
	defer deferFlush(t, loaded.ObjectHandle, &err)

	// Read the PCRs ourselves so a refusal can name what moved.
	current, err := readPCRs(t, b.pcrs)
	if err != nil {
		return nil, err
	}

	// The session is salted and EncryptOut so the secret leaves the TPM
	// encrypted, just as Seal sent it in.
	sess, closeSess, err := tpm2.PolicySession(t, tpm2.TPMAlgSHA256, 16,
		tpm2.Salted(k.handle, k.pub),
		tpm2.AESEncryption(128, tpm2.EncryptOut))
	if err != nil {
		return nil, fmt.Errorf("start TPM policy session: %w", err)
	}
	defer func() {
		if cerr := closeSess(); cerr != nil && err == nil {
			err = fmt.Errorf("flush TPM session: %w", cerr)
		}
	}()

	// Passing the sealed-time composite makes the TPM compare it with the
	// live PCRs right here (TPM_RC_VALUE), not fail later with a vaguer
	// policy error.
	_, err = tpm2.PolicyPCR{
		PolicySession: sess.Handle(),
		PcrDigest:     tpm2.TPM2BDigest{Buffer: b.composite},
		Pcrs:          pcrSelection(b.pcrs),
	}.Execute(t)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCValue) {
			return nil, policyMismatch(b, current)
		}
		return nil, fmt.Errorf("TPM PolicyPCR: %w", err)
	}

	rsp, err := tpm2.Unseal{
		ItemHandle: tpm2.AuthHandle{Handle: loaded.ObjectHandle, Name: loaded.Name, Auth: sess},
	}.Execute(t)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCPolicyFail) || errors.Is(err, tpm2.TPMRCPCRChanged) {
			return nil, policyMismatch(b, current)
		}
		return nil, fmt.Errorf("TPM unseal: %w", err)
	}
	return rsp.OutData.Buffer, nil
}

// policyMismatch builds the operator-facing error: which PCRs moved and
// what usually moves them. The caller adds how to get the secret back.
func policyMismatch(b *sealedBlob, current [][]byte) error {
	var changed []int
	for i, p := range b.pcrs {
		if !bytes.Equal(b.pcrValues[i], current[i]) {
			changed = append(changed, p)
		}
	}
	what := "the PCR values changed"
	if len(changed) > 0 {
		what = describePCRs(changed) + " changed"
	}
	return fmt.Errorf("%w: %s since the key was sealed (a firmware update, a Secure Boot change or a different boot chain), so the TPM will not release it",
		ErrPolicyMismatch, what)
}
