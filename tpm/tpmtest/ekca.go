package tpmtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Manufacturer is a TPM maker for tests: a root and an issuing CA in a
// directory of the test's own (not /var/lib/swtpm-localca), with which
// swtpm_localca signs the EK certificate of every TPM made with
// StartSwtpmWithEK.
type Manufacturer struct {
	dir string
}

// NewManufacturer makes the CA and swtpm_setup's configuration naming it.
// It skips the test when swtpm_setup is not installed.
func NewManufacturer(t testing.TB) *Manufacturer {
	t.Helper()
	if _, err := exec.LookPath("swtpm_setup"); err != nil {
		t.Skip("swtpm_setup not installed (apt-get install swtpm-tools)")
	}
	dir, err := os.MkdirTemp("", "ekca")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ca := filepath.Join(dir, "ca")
	if err := os.Mkdir(ca, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"localca.conf":    fmt.Sprintf("statedir = %[1]s\nsigningkey = %[1]s/signkey.pem\nissuercert = %[1]s/issuercert.pem\ncertserial = %[1]s/certserial\n", ca),
		"localca.options": "--platform-manufacturer stratum-test\n--platform-version 2.1\n--platform-model swtpm\n",
		"setup.conf":      fmt.Sprintf("create_certs_tool = /usr/bin/swtpm_localca\ncreate_certs_tool_config = %[1]s/localca.conf\ncreate_certs_tool_options = %[1]s/localca.options\nactive_pcr_banks = sha256\n", dir),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeCA(ca); err != nil {
		t.Fatalf("manufacturer CA: %v", err)
	}
	return &Manufacturer{dir: dir}
}

// writeCA writes the root and issuing CA swtpm_localca would otherwise
// create (two RSA keys, seconds on a busy machine): ECDSA P-256 keys, made
// in microseconds. swtpm_localca signs each EK certificate with the
// issuing key it finds there.
func writeCA(dir string) error {
	now := time.Now().Add(-time.Hour)
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	issuerKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := func(serial int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now, NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	}
	root := ca(1, "stratum test TPM manufacturer root")
	rootDER, err := x509.CreateCertificate(rand.Reader, root, root, &rootKey.PublicKey, rootKey)
	if err != nil {
		return err
	}
	issuerDER, err := x509.CreateCertificate(rand.Reader, ca(2, "stratum test TPM manufacturer EK CA"), root, &issuerKey.PublicKey, rootKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(issuerKey)
	if err != nil {
		return err
	}
	for name, blk := range map[string]*pem.Block{
		"swtpm-localca-rootca-cert.pem": {Type: "CERTIFICATE", Bytes: rootDER},
		"issuercert.pem":                {Type: "CERTIFICATE", Bytes: issuerDER},
		"signkey.pem":                   {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "certserial"), []byte("2\n"), 0o600)
}

// StartSwtpmWithEK manufactures a TPM as swtpm_setup --create-ek-cert
// does (RSA and ECC EKs, their certificates in the standard NV indices,
// signed by m) and starts it like StartSwtpm.
func StartSwtpmWithEK(t testing.TB, m *Manufacturer) (socketPath string) {
	t.Helper()
	return startSwtpm(t, func(state string) {
		cmd := exec.Command("swtpm_setup", "--tpm2", "--tpmstate", state, "--create-ek-cert",
			"--config", filepath.Join(m.dir, "setup.conf"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("swtpm_setup --create-ek-cert: %v\n%s", err, out)
		}
	})
}

// CABundle is the manufacturer's root and issuing CA certificates (PEM),
// what a founder's --ek-ca names. Call it after a TPM was made.
func (m *Manufacturer) CABundle(t testing.TB) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, f := range []string{"swtpm-localca-rootca-cert.pem", "issuercert.pem"} {
		b, err := os.ReadFile(filepath.Join(m.dir, "ca", f))
		if err != nil {
			t.Fatalf("manufacturer CA: %v", err)
		}
		out.Write(b)
	}
	return out.Bytes()
}
