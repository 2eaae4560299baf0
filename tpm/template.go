package tpm

import (
	"bytes"
	"errors"

	"github.com/google/go-tpm/tpm2"
)

// sealedTemplate is the public area of a sealed data object: bound to this
// TPM and this parent, usable only through the PCR policy (no
// UserWithAuth, so no password path exists), and exempt from dictionary
// attack lockout because a boot loop must not lock the TPM.
func sealedTemplate(policy []byte) tpm2.TPMTPublic {
	return tpm2.TPMTPublic{
		Type:    tpm2.TPMAlgKeyedHash,
		NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{
			FixedTPM:    true,
			FixedParent: true,
			NoDA:        true,
		},
		AuthPolicy: tpm2.TPM2BDigest{Buffer: policy},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgKeyedHash,
			&tpm2.TPMSKeyedHashParms{Scheme: tpm2.TPMTKeyedHashScheme{Scheme: tpm2.TPMAlgNull}}),
	}
}

// checkSealedPublic rejects a public area that is not one Seal would make:
// a blob that swapped in UserWithAuth or another policy would otherwise
// let the secret out under weaker terms.
func checkSealedPublic(pub *tpm2.TPMTPublic, policy []byte) error {
	if pub.Type != tpm2.TPMAlgKeyedHash || pub.NameAlg != tpm2.TPMAlgSHA256 {
		return errors.New("public area is not a SHA-256 keyed-hash object")
	}
	if pub.ObjectAttributes != sealedTemplate(nil).ObjectAttributes {
		return errors.New("sealed object attributes differ from FixedTPM|FixedParent|NoDA")
	}
	if !bytes.Equal(pub.AuthPolicy.Buffer, policy) {
		return errors.New("sealed object's policy is not the PCR policy the blob describes")
	}
	return nil
}
