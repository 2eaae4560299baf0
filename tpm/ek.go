package tpm

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// NV indices where a TPM's manufacturer stores the EK certificates of the
// standard RSA-2048 and ECC P-256 EKs (TCG EK Credential Profile).
const (
	nvRSAEKCert tpm2.TPMHandle = 0x01C00002
	nvECCEKCert tpm2.TPMHandle = 0x01C0000A
)

// nvChunk is what one NV_Read asks for: every TPM's NV buffer holds at
// least this much.
const nvChunk = 512

// maxNVCert bounds the certificate read: a real EK certificate is 1-2 KiB.
const maxNVCert = 8 << 10

// ekCertificate reads the manufacturer's EK certificate, RSA first (the
// one most TPMs carry), and returns it with the EK template it certifies.
// A TPM with neither gets no certificate and the ECC template, the faster
// key to derive.
func ekCertificate(t transport.TPM) (cert []byte, template tpm2.TPMTPublic, err error) {
	for _, c := range []struct {
		index    tpm2.TPMHandle
		template tpm2.TPMTPublic
	}{{nvRSAEKCert, tpm2.RSAEKTemplate}, {nvECCEKCert, tpm2.ECCEKTemplate}} {
		der, found, err := readNV(t, c.index)
		if err != nil {
			return nil, tpm2.TPMTPublic{}, fmt.Errorf("read the EK certificate at NV 0x%08x: %w", uint32(c.index), err)
		}
		if found {
			return der, c.template, nil
		}
	}
	return nil, tpm2.ECCEKTemplate, nil
}

// readNV reads a whole NV index; found is false when it is not defined.
func readNV(t transport.TPM, index tpm2.TPMHandle) (data []byte, found bool, err error) {
	pub, err := tpm2.NVReadPublic{NVIndex: index}.Execute(t)
	if errors.Is(err, tpm2.TPMRCHandle) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	nv, err := pub.NVPublic.Contents()
	if err != nil {
		return nil, false, err
	}
	if nv.DataSize > maxNVCert {
		return nil, false, fmt.Errorf("%d bytes: larger than an EK certificate", nv.DataSize)
	}
	// EK certificate indices are readable with their own empty auth
	// (AuthRead); some are readable only by the owner.
	auth := tpm2.AuthHandle{Handle: index, Name: pub.NVName, Auth: tpm2.PasswordAuth(nil)}
	if !nv.Attributes.AuthRead {
		auth = tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}
	}
	out := make([]byte, 0, nv.DataSize)
	for off := uint16(0); off < nv.DataSize; {
		n := min(nv.DataSize-off, nvChunk)
		rsp, err := tpm2.NVRead{
			AuthHandle: auth,
			NVIndex:    tpm2.NamedHandle{Handle: index, Name: pub.NVName},
			Size:       n,
			Offset:     off,
		}.Execute(t)
		if err != nil {
			return nil, false, err
		}
		if len(rsp.Data.Buffer) == 0 {
			return nil, false, errors.New("the TPM returned no data")
		}
		out = append(out, rsp.Data.Buffer...)
		off += uint16(len(rsp.Data.Buffer))
	}
	return out, true, nil
}

// loadedKey is a key the caller releases: a transient one is flushed, a
// persistent one stays.
type loadedKey struct {
	handle     tpm2.TPMHandle
	name       tpm2.TPM2BName
	public     tpm2.TPM2BPublic
	persistent bool
}

// release flushes a transient key, folding a failure into *err.
func (k *loadedKey) release(t transport.TPM, err *error) {
	if !k.persistent {
		deferFlush(t, k.handle, err)
	}
}

// Persistent EK handles of the TCG provisioning guidance: a TPM
// provisioned with its EK keeps it there, and deriving an RSA EK again
// takes a real TPM seconds.
const (
	persistentRSAEK tpm2.TPMHandle = 0x81010001
	persistentECCEK tpm2.TPMHandle = 0x81010002
)

// endorsementKey is the EK of template: the persistent one when the TPM
// keeps an EK made from that template (the same key the template derives,
// under the same policy), else derived again as a transient primary key.
func endorsementKey(t transport.TPM, template tpm2.TPMTPublic) (*loadedKey, error) {
	h := persistentRSAEK
	if template.Type == tpm2.TPMAlgECC {
		h = persistentECCEK
	}
	if rsp, err := (tpm2.ReadPublic{ObjectHandle: h}).Execute(t); err == nil {
		if pub, err := rsp.OutPublic.Contents(); err == nil && madeFrom(pub, template) {
			return &loadedKey{handle: h, name: rsp.Name, public: rsp.OutPublic, persistent: true}, nil
		}
	}
	k, err := createPrimary(t, tpm2.TPMRHEndorsement, template)
	if err != nil {
		return nil, fmt.Errorf("create the TPM endorsement key: %w", err)
	}
	return k, nil
}

// madeFrom reports whether pub is template but for the unique (public
// key) field.
func madeFrom(pub *tpm2.TPMTPublic, template tpm2.TPMTPublic) bool {
	p := *pub
	p.Unique = template.Unique
	return bytes.Equal(tpm2.Marshal(p), tpm2.Marshal(template))
}

// createPrimary derives a primary key: the same template under the same
// hierarchy seed always gives the same key, so the EK and the AK of a
// claim are found again when the challenge comes, with nothing stored.
func createPrimary(t transport.TPM, hierarchy tpm2.TPMHandle, template tpm2.TPMTPublic) (*loadedKey, error) {
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: hierarchy,
		InPublic:      tpm2.New2B(template),
	}.Execute(t)
	if err != nil {
		return nil, err
	}
	return &loadedKey{handle: rsp.ObjectHandle, name: rsp.Name, public: rsp.OutPublic}, nil
}

// akTemplate is the attestation key: an ECC P-256 restricted signing key
// (ECDSA, SHA-256) generated in the TPM and bound to it, derived as a
// primary key of the endorsement hierarchy like the EK it is vouched by.
var akTemplate = tpm2.TPMTPublic{
	Type:    tpm2.TPMAlgECC,
	NameAlg: tpm2.TPMAlgSHA256,
	ObjectAttributes: tpm2.TPMAObject{
		FixedTPM:            true,
		FixedParent:         true,
		SensitiveDataOrigin: true,
		UserWithAuth:        true,
		Restricted:          true,
		SignEncrypt:         true,
		NoDA:                true,
	},
	Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		Scheme: tpm2.TPMTECCScheme{
			Scheme:  tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256}),
		},
		CurveID: tpm2.TPMECCNistP256,
	}),
	Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
		Y: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
	}),
}

// ekPolicy satisfies the standard EK's policy, PolicySecret(endorsement):
// the endorsement hierarchy's auth is the empty one a TPM ships with.
func ekPolicy(t transport.TPM, handle tpm2.TPMISHPolicy, nonceTPM tpm2.TPM2BNonce) error {
	_, err := tpm2.PolicySecret{
		AuthHandle:    tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		PolicySession: handle,
		NonceTPM:      nonceTPM,
	}.Execute(t)
	return err
}
