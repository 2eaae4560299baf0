package tpm

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"stratum/tpm/tpmtest"
)

// A TPM manufactured with EK certificates: the RSA one is read from NV,
// the EK it certifies is the persistent one (the same key the standard
// template derives), and claim and answer leave no handle behind.
func TestAttestationOnSwtpmWithEK(t *testing.T) {
	sock := tpmtest.StartSwtpmWithEK(t, tpmtest.NewManufacturer(t))
	tp, err := Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()

	cert, template, err := ekCertificate(tp)
	if err != nil || len(cert) == 0 || template.Type != tpm2.TPMAlgRSA {
		t.Fatalf("ekCertificate = %d bytes, type 0x%x, %v", len(cert), uint16(template.Type), err)
	}
	ek, err := endorsementKey(tp, template)
	if err != nil {
		t.Fatal(err)
	}
	if !ek.persistent {
		t.Error("the persistent EK was not used")
	}
	derived, err := createPrimary(tp, tpm2.TPMRHEndorsement, template)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(derived.public.Bytes(), ek.public.Bytes()) {
		t.Error("the persistent EK is not the key the template derives")
	}
	if err := flush(tp, derived.handle); err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(cert)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := tpm2.Unmarshal[tpm2.TPMTPublic](ek.public.Bytes())
	key, err := tpm2.Pub(*pub)
	if err != nil || !x.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(key) {
		t.Fatalf("the certificate does not certify the EK (%v)", err)
	}
	c, err := attestationClaim(tp)
	if err != nil || !bytes.Equal(c.EKPublic, ek.public.Bytes()) {
		t.Fatalf("attestationClaim: %v", err)
	}
	assertNoHandles(t, tp)
}
