package joiner

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"stratum/crypto"
)

// identityFile is the joiner's ed25519 key in the state dir. The key IS the
// joiner's identity on the join listener (its SPKI pin), so it is created
// once and kept: a restart, or a re-registration after a self-upgrade,
// presents the same key and finds the same registration.
const identityFile = "identity.key"

// Identity is the joiner's key and its fingerprint.
type Identity struct {
	Key ed25519.PrivateKey
	// Fingerprint is "sha256:" + hex of the SHA-256 of the public key's
	// SubjectPublicKeyInfo: the same value the founder shows the operator.
	Fingerprint string
}

// LoadOrCreateIdentity reads stateDir/identity.key (PKCS#8 PEM), creating
// it with mode 0600 when absent. A key file readable by group or others is
// refused rather than silently used: anyone who read it could impersonate
// this node on the join listener and receive its delivery.
func LoadOrCreateIdentity(stateDir string) (*Identity, error) {
	path := filepath.Join(stateDir, identityFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return createIdentity(path)
	case err != nil:
		return nil, fmt.Errorf("identity key: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("identity key %s has mode %04o: others could read it; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	signer, err := crypto.ParseKeyPEM(b)
	if err != nil {
		return nil, fmt.Errorf("identity key %s: %w", path, err)
	}
	key, ok := signer.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("identity key %s: a %T, not an ed25519 key", path, signer)
	}
	return newIdentity(key)
}

// NewIdentity is a fresh identity kept nowhere (for a caller that keeps
// it itself, or a test).
func NewIdentity() (*Identity, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return newIdentity(key)
}

func createIdentity(path string) (*Identity, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	pemBytes, err := crypto.MarshalKeyPEM(key)
	if err != nil {
		return nil, err
	}
	if err := crypto.WriteFileAtomic(path, pemBytes, 0o600); err != nil {
		return nil, fmt.Errorf("write identity key: %w", err)
	}
	return newIdentity(key)
}

func newIdentity(key ed25519.PrivateKey) (*Identity, error) {
	fp, err := crypto.PublicKeyPin(key.Public())
	if err != nil {
		return nil, err
	}
	return &Identity{Key: key, Fingerprint: fp}, nil
}

// ClientCertificate is a self-signed certificate of the identity key for
// the TLS handshake. It is made afresh each run: the founder pins the key,
// not the certificate, so nothing about it needs to persist.
func (id *Identity) ClientCertificate(now time.Time) (tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "stratum joiner " + id.Fingerprint[:len("sha256:")+16]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, id.Key.Public(), id.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: id.Key, Leaf: leaf}, nil
}
