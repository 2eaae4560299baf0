package release

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyID is the lowercase hex SHA-256 of the raw 32-byte public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// Keygen writes a new key pair: out+".key" (PKCS#8 PEM, mode 0600) and
// out+".pub" (PKIX PEM, mode 0644). It never overwrites an existing key.
func Keygen(out string) (keyID string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	keyPath, pubPath := out+".key", out+".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", fmt.Errorf("%s already exists: refusing to overwrite a release key", p)
		}
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", err
	}
	if err := writeNew(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		os.Remove(keyPath)
		return "", err
	}
	return KeyID(pub), nil
}

// writeNew creates path exclusively with mode (not widened by a umask
// race: the mode is set on the open file), writes data and syncs it.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err == nil {
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			return nil
		}
	} else {
		f.Close()
	}
	os.Remove(path)
	return err
}

// LoadPrivateKey reads a NAME.key file. A key readable by group or others
// is refused: whoever can read it can sign releases.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets others read the signing key; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM \"PRIVATE KEY\" (PKCS#8) file", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an ed25519 key", path, k)
	}
	return priv, nil
}

// ParsePublicKey decodes a PEM "PUBLIC KEY" (PKIX) holding an ed25519 key.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM \"PUBLIC KEY\" file")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an ed25519 key", k)
	}
	return pub, nil
}

// LoadPublicKey reads a NAME.pub file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, err := ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pub, nil
}

// KeyFile is one NAME.pub file of a keys directory: its key and key id,
// or Err when it holds none.
type KeyFile struct {
	Name, Path string
	ID         string
	Pub        ed25519.PublicKey
	Err        error
}

// ReadKeyFiles reads the *.pub files of dir, in name order; a file that
// holds no ed25519 public key is listed with its Err.
func ReadKeyFiles(dir string) ([]KeyFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []KeyFile
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pub") || e.IsDir() {
			continue
		}
		f := KeyFile{Name: e.Name(), Path: filepath.Join(dir, e.Name())}
		if f.Pub, f.Err = LoadPublicKey(f.Path); f.Err == nil {
			f.ID = KeyID(f.Pub)
		}
		files = append(files, f)
	}
	return files, nil
}

// LoadKeyring trusts every *.pub file in dir (threshold 0 means 1). A file
// that does not hold an ed25519 public key is an error naming it: a
// keyring that silently skipped a key would fail later and obscurely.
func LoadKeyring(dir string, threshold int) (*Keyring, error) {
	if threshold == 0 {
		threshold = 1
	}
	files, err := ReadKeyFiles(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("release keys: %s does not exist (put the release public keys, NAME.pub, there)", dir)
		}
		return nil, fmt.Errorf("release keys: %w", err)
	}
	var keys []ed25519.PublicKey
	for _, f := range files {
		if f.Err != nil {
			return nil, fmt.Errorf("release keys: %w", f.Err)
		}
		keys = append(keys, f.Pub)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("release keys: no *.pub file in %s", dir)
	}
	k, err := NewKeyring(threshold, keys...)
	if err != nil {
		return nil, fmt.Errorf("release keys in %s: %w", dir, err)
	}
	return k, nil
}
