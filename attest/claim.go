package attest

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-tpm/tpm2"

	"stratum/wire"
)

// EK chain results, as AttestationView.EKChain shows them.
const (
	ChainVerified = "verified" // the EK certificate chains to the pool
	ChainNone     = "none"     // no certificate, no pool, or no chain to it
)

// Size limits of a claim's parts: far above any real TPM's, low enough
// that a hostile claim costs the founder nothing.
const (
	maxEKCert = 8 << 10
	maxPublic = 1 << 10
)

// Evidence is what a checked claim establishes.
type Evidence struct {
	// EKSHA256 is hex SHA-256 of the EK's SubjectPublicKeyInfo (DER).
	EKSHA256 string
	// EKCertSHA256 is hex SHA-256 of the EK certificate (DER); empty
	// without one.
	EKCertSHA256 string
	// EKChain is ChainVerified or ChainNone; ChainProblem says why not
	// verified when a certificate was presented.
	EKChain      string
	ChainProblem string
	// AKName is the hex TPM name of the attestation key, what the
	// credential challenge is bound to.
	AKName string

	ek tpm2.TPMTPublic
	ak tpm2.TPMTPublic
}

// CheckClaim parses and checks a joiner's claim: the EK is a TPM-bound
// restricted decryption key, the AK a TPM-bound restricted signing key
// generated inside the TPM, and the EK certificate, when given, certifies
// exactly the EK. The chain to pool (nil: none configured) is evidence,
// not a condition: a claim without one may still match an EK pinned by
// hash. The error says what is wrong, for the registration's answer.
func CheckClaim(c wire.AttestationClaim, pool *Pool, now time.Time) (Evidence, error) {
	var ev Evidence
	ek, err := parsePublic("ekPublic", c.EKPublic)
	if err != nil {
		return ev, err
	}
	if err := checkEK(ek); err != nil {
		return ev, fmt.Errorf("ekPublic: %w", err)
	}
	ak, err := parsePublic("akPublic", c.AKPublic)
	if err != nil {
		return ev, err
	}
	if err := checkAK(ak); err != nil {
		return ev, fmt.Errorf("akPublic: %w", err)
	}
	ekKey, err := tpm2.Pub(*ek)
	if err != nil {
		return ev, fmt.Errorf("ekPublic: %w", err)
	}
	spki, err := x509.MarshalPKIXPublicKey(ekKey)
	if err != nil {
		return ev, fmt.Errorf("ekPublic: %w", err)
	}
	name, err := tpm2.ObjectName(ak)
	if err != nil {
		return ev, fmt.Errorf("akPublic: %w", err)
	}
	ev = Evidence{EKSHA256: hexSHA256(spki), EKChain: ChainNone, AKName: hex.EncodeToString(name.Buffer), ek: *ek, ak: *ak}
	if len(c.EKCert) == 0 {
		ev.ChainProblem = "no EK certificate was presented"
		return ev, nil
	}
	cert, err := parseEKCert(c.EKCert)
	if err != nil {
		return Evidence{}, fmt.Errorf("ekCert: %w", err)
	}
	certKey, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !certKey.Equal(ekKey) {
		return Evidence{}, errors.New("ekCert: the certificate does not certify ekPublic's key")
	}
	ev.EKCertSHA256 = hexSHA256(cert.Raw)
	if ev.ChainProblem = chainProblem(cert, pool, now); ev.ChainProblem == "" {
		ev.EKChain = ChainVerified
	}
	return ev, nil
}

func parsePublic(field string, b []byte) (*tpm2.TPMTPublic, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: required", field)
	}
	if len(b) > maxPublic {
		return nil, fmt.Errorf("%s: larger than %d bytes", field, maxPublic)
	}
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](b)
	if err != nil {
		return nil, fmt.Errorf("%s: not a TPMT_PUBLIC: %v", field, err)
	}
	if again := tpm2.Marshal(pub); len(again) != len(b) {
		return nil, fmt.Errorf("%s: %d bytes after the TPMT_PUBLIC", field, len(b)-len(again))
	}
	return pub, nil
}

// checkEK accepts the keys the TCG EK templates make: a restricted
// decryption key that cannot leave its TPM, SHA-256 named, RSA of 2048
// bits or more or ECC P-256/P-384, whose symmetric parameters
// MakeCredential needs.
func checkEK(p *tpm2.TPMTPublic) error {
	a := p.ObjectAttributes
	if !a.FixedTPM || !a.FixedParent || !a.SensitiveDataOrigin || !a.Restricted || !a.Decrypt || a.SignEncrypt {
		return errors.New("not an endorsement key: want a restricted decryption key with fixedTPM, fixedParent and sensitiveDataOrigin")
	}
	if err := checkKeySize(p); err != nil {
		return err
	}
	if _, err := tpm2.ImportEncapsulationKey(p); err != nil {
		return fmt.Errorf("cannot make a credential for this key: %v", err)
	}
	return nil
}

// checkAK accepts a restricted signing key generated in and bound to the
// TPM: a TPM signs with a restricted key only what it produced itself
// (quotes, certifications), never outside data that starts with
// TPM_GENERATED, so its quotes cannot be forged with a TPM's help.
func checkAK(p *tpm2.TPMTPublic) error {
	a := p.ObjectAttributes
	switch {
	case !a.FixedTPM || !a.FixedParent:
		return errors.New("the attestation key can leave its TPM: want fixedTPM and fixedParent")
	case !a.SensitiveDataOrigin:
		return errors.New("the attestation key was not generated inside the TPM: want sensitiveDataOrigin")
	case !a.Restricted || !a.SignEncrypt || a.Decrypt:
		return errors.New("the attestation key is not a restricted signing key")
	case p.NameAlg != tpm2.TPMAlgSHA256:
		return errors.New("the attestation key's name algorithm is not SHA-256")
	}
	if err := checkKeySize(p); err != nil {
		return err
	}
	_, err := akScheme(p)
	return err
}

func checkKeySize(p *tpm2.TPMTPublic) error {
	switch p.Type {
	case tpm2.TPMAlgRSA:
		d, err := p.Parameters.RSADetail()
		if err != nil {
			return err
		}
		if d.KeyBits < 2048 {
			return fmt.Errorf("RSA key of %d bits: want 2048 or more", d.KeyBits)
		}
	case tpm2.TPMAlgECC:
		d, err := p.Parameters.ECCDetail()
		if err != nil {
			return err
		}
		if d.CurveID != tpm2.TPMECCNistP256 && d.CurveID != tpm2.TPMECCNistP384 {
			return errors.New("ECC key not on P-256 or P-384")
		}
	default:
		return fmt.Errorf("key type 0x%x: want RSA or ECC", uint16(p.Type))
	}
	_, err := tpm2.Pub(*p)
	return err
}

// akScheme is the AK's fixed signing scheme: RSASSA or ECDSA with SHA-256.
// A restricted signing key must name one, so a quote's signature cannot
// be made under another.
func akScheme(p *tpm2.TPMTPublic) (tpm2.TPMAlgID, error) {
	switch p.Type {
	case tpm2.TPMAlgRSA:
		d, _ := p.Parameters.RSADetail()
		if d.Scheme.Scheme == tpm2.TPMAlgRSASSA {
			if s, err := d.Scheme.Details.RSASSA(); err == nil && s.HashAlg == tpm2.TPMAlgSHA256 {
				return tpm2.TPMAlgRSASSA, nil
			}
		}
	case tpm2.TPMAlgECC:
		d, _ := p.Parameters.ECCDetail()
		if d.Scheme.Scheme == tpm2.TPMAlgECDSA {
			if s, err := d.Scheme.Details.ECDSA(); err == nil && s.HashAlg == tpm2.TPMAlgSHA256 {
				return tpm2.TPMAlgECDSA, nil
			}
		}
	}
	return 0, errors.New("the attestation key's scheme is not RSASSA-SHA256 or ECDSA-SHA256")
}

// parseEKCert parses the DER certificate. TPMs store it in an NV index
// that may be larger than the certificate: trailing padding is cut at the
// end of the outer DER element.
func parseEKCert(b []byte) (*x509.Certificate, error) {
	if len(b) > maxEKCert {
		return nil, fmt.Errorf("larger than %d bytes", maxEKCert)
	}
	var outer asn1.RawValue
	rest, err := asn1.Unmarshal(b, &outer)
	if err != nil {
		return nil, fmt.Errorf("not a DER certificate: %v", err)
	}
	for _, c := range rest {
		if c != 0 && c != 0xff {
			return nil, errors.New("data after the certificate")
		}
	}
	cert, err := x509.ParseCertificate(b[:len(b)-len(rest)])
	if err != nil {
		return nil, fmt.Errorf("not a certificate: %v", err)
	}
	return cert, nil
}

// oidSubjectAltName is the subject alternative name extension.
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// chainProblem says why cert does not chain to pool, or "" when it does.
// An EK certificate names no host and has the TCG's EK purpose, so any
// extended key usage is accepted. Its subject is empty and its critical
// subject alternative name holds only a directory name (the TPM's
// manufacturer, model and version), which Go's parser leaves "unhandled":
// no name of it is ever matched here, so that one extension is taken as
// understood; any other unhandled critical extension still fails.
func chainProblem(cert *x509.Certificate, pool *Pool, now time.Time) string {
	if pool == nil {
		return "the founder has no manufacturer CA pool (--ek-ca)"
	}
	c := *cert
	c.UnhandledCriticalExtensions = slices.DeleteFunc(slices.Clone(c.UnhandledCriticalExtensions),
		func(oid asn1.ObjectIdentifier) bool { return oid.Equal(oidSubjectAltName) })
	_, err := c.Verify(x509.VerifyOptions{
		Roots:         pool.roots,
		Intermediates: pool.intermediates,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return "the EK certificate does not chain to the manufacturer CA pool: " + err.Error()
	}
	return ""
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
