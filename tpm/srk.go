package tpm

import (
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// srk is a transient storage root key. It is re-derived on every use rather
// than persisted: the same template under the same owner seed always yields
// the same key, so nothing has to be provisioned in the TPM's NV space.
type srk struct {
	handle tpm2.TPMHandle
	name   tpm2.TPM2BName
	pub    tpm2.TPMTPublic
}

// createSRK derives the TCG standard ECC P-256 SRK in the owner hierarchy.
// The caller must flush s.handle. An owner password is not supported: an
// appliance's TPM is left with the empty owner auth it ships with.
func createSRK(t transport.TPM) (*srk, error) {
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.TPMRHOwner,
		InPublic:      tpm2.New2B(tpm2.ECCSRKTemplate),
	}.Execute(t)
	if err != nil {
		return nil, fmt.Errorf("create TPM storage root key: %w", err)
	}
	pub, err := rsp.OutPublic.Contents()
	if err != nil {
		flushErr := flush(t, rsp.ObjectHandle)
		return nil, errors.Join(fmt.Errorf("TPM storage root key public area: %w", err), flushErr)
	}
	return &srk{handle: rsp.ObjectHandle, name: rsp.Name, pub: *pub}, nil
}

// flush evicts a transient object or session; the TPM has only a handful of
// slots and the kernel resource manager does not flush for socket TPMs.
func flush(t transport.TPM, h tpm2.TPMHandle) error {
	if _, err := (tpm2.FlushContext{FlushHandle: h}).Execute(t); err != nil {
		return fmt.Errorf("flush TPM handle 0x%x: %w", uint32(h), err)
	}
	return nil
}

// deferFlush flushes h and folds a flush failure into *err, for defers.
func deferFlush(t transport.TPM, h tpm2.TPMHandle, err *error) {
	if ferr := flush(t, h); ferr != nil {
		*err = errors.Join(*err, ferr)
	}
}
