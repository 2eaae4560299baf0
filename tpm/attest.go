package tpm

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// Claim is what a joiner presents of its TPM: the EK certificate (DER, as
// the TPM stores it; empty when it has none), the EK's and the AK's
// TPMT_PUBLIC.
type Claim struct {
	EKCert   []byte
	EKPublic []byte
	AKPublic []byte
}

// Proof answers a credential challenge: the recovered secret, and the
// quote (TPMS_ATTEST) and its TPMT_SIGNATURE made by the AK.
type Proof struct {
	Secret    []byte
	Quote     []byte
	Signature []byte
}

// quotedPCRs are quoted with the qualifying data: the founder checks only
// the binding, but the boot state (Secure Boot policy) comes along.
var quotedPCRs = []int{7}

// AttestationClaim opens the TPM at path and returns its claim. The EK and
// the AK are primary keys, derived again by Answer: nothing is stored.
func AttestationClaim(path string) (Claim, error) {
	t, err := Open(path)
	if err != nil {
		return Claim{}, err
	}
	defer t.Close()
	return attestationClaim(t)
}

func attestationClaim(t transport.TPM) (c Claim, err error) {
	cert, template, err := ekCertificate(t)
	if err != nil {
		return Claim{}, err
	}
	ek, err := endorsementKey(t, template)
	if err != nil {
		return Claim{}, err
	}
	defer ek.release(t, &err)
	ak, err := createPrimary(t, tpm2.TPMRHEndorsement, akTemplate)
	if err != nil {
		return Claim{}, fmt.Errorf("create the TPM attestation key: %w", err)
	}
	defer deferFlush(t, ak.handle, &err)
	return Claim{EKCert: cert, EKPublic: ek.public.Bytes(), AKPublic: ak.public.Bytes()}, nil
}

// Answer opens the TPM at path and answers the founder's challenge for
// claim: ActivateCredential recovers the secret (only this TPM's EK can,
// and only for this AK), and the AK quotes qualifyingData.
func Answer(path string, claim Claim, credentialBlob, encryptedSecret, qualifyingData []byte) (Proof, error) {
	t, err := Open(path)
	if err != nil {
		return Proof{}, err
	}
	defer t.Close()
	return answer(t, claim, credentialBlob, encryptedSecret, qualifyingData)
}

func answer(t transport.TPM, claim Claim, credentialBlob, encryptedSecret, qualifyingData []byte) (p Proof, err error) {
	ekPub, err := tpm2.Unmarshal[tpm2.TPMTPublic](claim.EKPublic)
	if err != nil {
		return Proof{}, fmt.Errorf("the claim's EK: %w", err)
	}
	template := tpm2.ECCEKTemplate
	if ekPub.Type == tpm2.TPMAlgRSA {
		template = tpm2.RSAEKTemplate
	}
	ek, err := endorsementKey(t, template)
	if err != nil {
		return Proof{}, err
	}
	defer ek.release(t, &err)
	ak, err := createPrimary(t, tpm2.TPMRHEndorsement, akTemplate)
	if err != nil {
		return Proof{}, fmt.Errorf("create the TPM attestation key: %w", err)
	}
	defer deferFlush(t, ak.handle, &err)
	if !bytes.Equal(ek.public.Bytes(), claim.EKPublic) || !bytes.Equal(ak.public.Bytes(), claim.AKPublic) {
		return Proof{}, errors.New("this TPM's endorsement or attestation key is not the one claimed at registration (another TPM, or its endorsement hierarchy was cleared)")
	}
	act, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: ak.handle, Name: ak.name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle:      tpm2.AuthHandle{Handle: ek.handle, Name: ek.name, Auth: tpm2.Policy(tpm2.TPMAlgSHA256, 16, ekPolicy)},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: credentialBlob},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: encryptedSecret},
	}.Execute(t)
	if err != nil {
		return Proof{}, fmt.Errorf("TPM ActivateCredential: %w", err)
	}
	q, err := tpm2.Quote{
		SignHandle:     tpm2.AuthHandle{Handle: ak.handle, Name: ak.name, Auth: tpm2.PasswordAuth(nil)},
		QualifyingData: tpm2.TPM2BData{Buffer: qualifyingData},
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
		PCRSelect:      pcrSelection(quotedPCRs),
	}.Execute(t)
	if err != nil {
		return Proof{}, fmt.Errorf("TPM Quote: %w", err)
	}
	return Proof{Secret: act.CertInfo.Buffer, Quote: q.Quoted.Bytes(), Signature: tpm2.Marshal(q.Signature)}, nil
}
