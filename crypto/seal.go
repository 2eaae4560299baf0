package crypto

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/crypto/chacha20poly1305"
)

// DataKey seals secrets with XChaCha20-Poly1305; its 32 bytes live in
// DIR/data.key, never in the store.
type DataKey struct{ key []byte }

// LoadOrCreateDataKey reads path, or creates it (0600) when create is true
// and it does not exist. A missing key with an existing store is an error:
// secrets must become unreadable, never silently empty.
func LoadOrCreateDataKey(path string, create bool) (*DataKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		k, err := GenerateDataKey()
		if err != nil {
			return nil, err
		}
		if err := WriteFileAtomic(path, k.key, 0o600); err != nil {
			return nil, err
		}
		return k, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data key %s: %w (the store's secrets cannot be opened without it)", path, err)
	}
	if len(b) != chacha20poly1305.KeySize {
		return nil, fmt.Errorf("data key %s: %d bytes, want %d", path, len(b), chacha20poly1305.KeySize)
	}
	return &DataKey{key: b}, nil
}

// GenerateDataKey returns a new random data key.
func GenerateDataKey() (*DataKey, error) {
	b := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return &DataKey{key: b}, nil
}

// Bytes returns a copy of the raw key, for sealing it to a TPM or writing
// it into an encrypted backup. Callers clear the copy when done.
func (k *DataKey) Bytes() []byte { return append([]byte(nil), k.key...) }

// Equal compares two keys in constant time.
func (k *DataKey) Equal(o *DataKey) bool { return subtle.ConstantTimeCompare(k.key, o.key) == 1 }

// String never shows the key, so a stray %v cannot log it.
func (k *DataKey) String() string { return "data key [redacted]" }

// NewDataKey wraps raw key bytes (tests, TPM-unsealed keys).
func NewDataKey(raw []byte) (*DataKey, error) {
	if len(raw) != chacha20poly1305.KeySize {
		return nil, fmt.Errorf("data key: %d bytes, want %d", len(raw), chacha20poly1305.KeySize)
	}
	return &DataKey{key: append([]byte(nil), raw...)}, nil
}

// Seal encrypts plaintext with a random 24-byte nonce prepended.
func (k *DataKey) Seal(plaintext, ad []byte) ([]byte, error) {
	aead, err := chacha20poly1305.NewX(k.key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plaintext, ad), nil
}

// Open decrypts what Seal produced.
func (k *DataKey) Open(ct, ad []byte) ([]byte, error) {
	aead, err := chacha20poly1305.NewX(k.key)
	if err != nil {
		return nil, err
	}
	if len(ct) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("sealed value too short")
	}
	pt, err := aead.Open(nil, ct[:aead.NonceSize()], ct[aead.NonceSize():], ad)
	if err != nil {
		return nil, errors.New("sealed value does not open under this data key")
	}
	return pt, nil
}

// DeriveKey returns a 32-byte subkey of the data key for one purpose
// (HKDF-SHA256, the purpose as info), so a key used for MACs is never the
// key used for sealing.
func (k *DataKey) DeriveKey(purpose string) ([]byte, error) {
	return hkdf.Key(sha256.New, k.key, nil, "stratum "+purpose, 32)
}
