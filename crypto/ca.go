// Package crypto holds the cluster CA and leaf issuance, key pins, secret
// sealing, and password and token hashing.
package crypto

import (
	stdcrypto "crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// CA is the cluster certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA creates an ECDSA P-256 CA valid for ten years.
func NewCA(clusterID string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "stratum cluster CA " + clusterID, Organization: []string{"stratum"}},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA parses the CA certificate PEM and its PKCS#8 key PEM.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := ParseKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("CA key is not ECDSA")
	}
	// The pin names the certificate; only its own key makes it the
	// cluster's CA (a store carrying a published certificate with another
	// key would pass a pin check).
	if !ec.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("the CA key does not match the CA certificate")
	}
	return &CA{Cert: cert, Key: ec}, nil
}

// CertPEM is the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM is the CA key in PKCS#8 PEM; a secret.
func (ca *CA) KeyPEM() ([]byte, error) { return MarshalKeyPEM(ca.Key) }

// Pin is the CA pin printed for joiners.
func (ca *CA) Pin() string { return SPKIPin(ca.Cert) }

// Pool is a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is an issued certificate with its key.
type Leaf struct {
	Cert    *x509.Certificate
	Key     stdcrypto.Signer // *ecdsa.PrivateKey, or ed25519.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// LeafRequest names what a leaf certifies.
type LeafRequest struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	URIs       []*url.URL
	Client     bool
	Server     bool
	Validity   time.Duration
	// Ed25519 gives the leaf an Ed25519 key instead of ECDSA P-256: a
	// handshake signature costs about half as much CPU, but browsers do
	// not accept it, so only for listeners this build's clients alone
	// reach (the join listener).
	Ed25519 bool
	// PublicKey, when set, is certified instead of a fresh key: the
	// holder of its private key asked for the leaf (a node renewing its
	// transport leaf). The Leaf then has no Key nor KeyPEM.
	PublicKey stdcrypto.PublicKey
}

// Issue creates a fresh key (ECDSA P-256 unless req.Ed25519) and a
// certificate for it, or certifies req.PublicKey.
func (ca *CA) Issue(req LeafRequest, now time.Time) (*Leaf, error) {
	var key stdcrypto.Signer
	pub := req.PublicKey
	if pub == nil {
		k, err := newLeafKey(req.Ed25519)
		if err != nil {
			return nil, err
		}
		key, pub = k, k.Public()
	}
	var usage []x509.ExtKeyUsage
	if req.Server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		usage = append(usage, x509.ExtKeyUsageClientAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: req.CommonName},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
		URIs:         req.URIs,
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(req.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	leaf := &Leaf{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if key != nil {
		if leaf.KeyPEM, err = MarshalKeyPEM(key); err != nil {
			return nil, err
		}
	}
	return leaf, nil
}

func newLeafKey(ed bool) (stdcrypto.Signer, error) {
	if ed {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		return key, err
	}
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// SPKIPin is "sha256:" + hex SHA-256 of the certificate's SubjectPublicKeyInfo.
func SPKIPin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// PublicKeyPin is SPKIPin for a bare public key.
func PublicKeyPin(pub stdcrypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ParseCertPEM parses the first CERTIFICATE block.
func ParseCertPEM(b []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no CERTIFICATE block in PEM")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// ParseKeyPEM parses a PKCS#8 PRIVATE KEY block.
func ParseKeyPEM(b []byte) (stdcrypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("no PRIVATE KEY block in PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(stdcrypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

// MarshalKeyPEM encodes a private key as PKCS#8 PEM.
func MarshalKeyPEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}
