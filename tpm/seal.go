package tpm

import (
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// maxSecret is MAX_SYM_DATA, the most a TPM seals in one object. An OpenBao
// unseal key (44 base64 characters) fits with room to spare.
const maxSecret = 128

// Seal seals secret to the TPM t under a policy on the current SHA-256
// values of pcrs (DefaultPCRs when empty) and returns a blob for Unseal.
func Seal(t transport.TPM, secret []byte, pcrs []int) (blob []byte, err error) {
	if len(secret) == 0 {
		return nil, fmt.Errorf("refusing to seal an empty secret")
	}
	if len(secret) > maxSecret {
		return nil, fmt.Errorf("secret is %d bytes; a TPM seals at most %d", len(secret), maxSecret)
	}
	pcrs, err = normalizePCRs(pcrs)
	if err != nil {
		return nil, err
	}
	values, err := readPCRs(t, pcrs)
	if err != nil {
		return nil, err
	}
	composite, policy, err := pcrPolicy(pcrs, values)
	if err != nil {
		return nil, fmt.Errorf("compute TPM PCR policy: %w", err)
	}

	k, err := createSRK(t)
	if err != nil {
		return nil, err
	}
	defer deferFlush(t, k.handle, &err)

	// Salting the session with the SRK keeps its key from anyone on the
	// bus; EncryptIn then hides the secret (Create's first parameter) in
	// transit to the TPM.
	sess, closeSess, err := tpm2.HMACSession(t, tpm2.TPMAlgSHA256, 16,
		tpm2.Salted(k.handle, k.pub),
		tpm2.AESEncryption(128, tpm2.EncryptIn))
	if err != nil {
		return nil, fmt.Errorf("start salted TPM session: %w", err)
	}
	defer func() {
		if cerr := closeSess(); cerr != nil && err == nil {
			err = fmt.Errorf("flush TPM session: %w", cerr)
		}
	}()

	rsp, err := tpm2.Create{
		ParentHandle: tpm2.AuthHandle{Handle: k.handle, Name: k.name, Auth: sess},
		InSensitive: tpm2.TPM2BSensitiveCreate{Sensitive: &tpm2.TPMSSensitiveCreate{
			Data: tpm2.NewTPMUSensitiveCreate(&tpm2.TPM2BSensitiveData{Buffer: secret}),
		}},
		InPublic: tpm2.New2B(sealedTemplate(policy)),
	}.Execute(t)
	if err != nil {
		return nil, fmt.Errorf("create TPM sealed object: %w", err)
	}
	b := &sealedBlob{
		pcrs:      pcrs,
		pcrValues: values,
		composite: composite,
		srkName:   k.name.Buffer,
		public:    rsp.OutPublic.Bytes(),
		private:   rsp.OutPrivate.Buffer,
	}
	return b.marshal()
}
