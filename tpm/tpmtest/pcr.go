package tpmtest

import (
	"crypto/sha256"
	"net"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// ExtendPCR measures something new into pcr, as a firmware or Secure Boot
// change would.
func ExtendPCR(t testing.TB, tp transport.TPM, pcr int) {
	t.Helper()
	d := sha256.Sum256([]byte("something else booted"))
	_, err := tpm2.PCRExtend{
		PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
		Digests: tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{
			HashAlg: tpm2.TPMAlgSHA256, Digest: d[:],
		}}},
	}.Execute(tp)
	if err != nil {
		t.Fatalf("extend PCR %d: %v", pcr, err)
	}
}

// ExtendSocketPCR extends pcr of the socket TPM StartSwtpm returned, for
// tests whose TPM user is another process.
func ExtendSocketPCR(t testing.TB, sock string, pcr int) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("open swtpm %s: %v", sock, err)
	}
	defer c.Close()
	ExtendPCR(t, transport.FromReadWriter(c), pcr)
}
