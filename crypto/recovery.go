package crypto

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"stratum/strictjson"
)

// A recovery key gets the data key back when the TPM it is sealed to no
// longer releases it (PCRs changed, board replaced). It is 32 bytes from
// crypto/rand shown once to the operator; stratum keeps only the data key
// encrypted under a key derived from it (the recovery file), never the
// recovery key itself.
//
// The wrapping key is HKDF-SHA256 of the recovery key with a random salt:
// the recovery key already has 256 bits of entropy, so a password-hardening
// KDF (argon2id) would only slow an honest recovery and add no security.
//
// Printed form: "stratum-rk1-" then the 32 key bytes and a 3-byte
// checksum in base32 (RFC 4648, A-Z2-7), 56 characters in groups of four,
// so a mistyped key is told apart from a wrong one.
const (
	recoveryPrefix   = "stratum-rk1-"
	recoveryKeyLen   = 32
	recoveryCheckLen = 3
	recoveryGroup    = 4
)

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// RecoveryKey is a parsed or new recovery key.
type RecoveryKey struct{ key []byte }

// ErrRecoveryKeyFormat: the text is not a recovery key at all.
var ErrRecoveryKeyFormat = errors.New("not a stratum recovery key (expected stratum-rk1- followed by 56 letters and digits in groups of four)")

// ErrRecoveryKeyTypo: the text has the shape of a recovery key but its
// checksum does not match, so a character was mistyped.
var ErrRecoveryKeyTypo = errors.New("the recovery key is mistyped (its checksum does not match); check each group of four")

// ErrWrongRecoveryKey: a well-formed recovery key that does not open the
// recovery file (a key printed for another data directory or an older seal).
var ErrWrongRecoveryKey = errors.New("the recovery key does not open this recovery file: it is not the key printed when this data key was sealed")

// NewRecoveryKey returns a fresh random recovery key.
func NewRecoveryKey() (*RecoveryKey, error) {
	k := make([]byte, recoveryKeyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return &RecoveryKey{key: k}, nil
}

func recoveryChecksum(key []byte) []byte {
	sum := sha256.Sum256(append([]byte(recoveryPrefix), key...))
	return sum[:recoveryCheckLen]
}

// Reveal is the printed form, for the one moment it is shown to the
// operator. (String is redacted so a stray %v never prints the key.)
func (r *RecoveryKey) Reveal() string {
	enc := recoveryEncoding.EncodeToString(append(append([]byte(nil), r.key...), recoveryChecksum(r.key)...))
	var b strings.Builder
	b.WriteString(recoveryPrefix)
	for i := 0; i < len(enc); i += recoveryGroup {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(enc[i:min(i+recoveryGroup, len(enc))])
	}
	return b.String()
}

// String never shows the key.
func (r *RecoveryKey) String() string { return recoveryPrefix + "[redacted]" }

// ParseRecoveryKey reads a printed recovery key. Case, spaces and the
// dashes between groups do not matter. Errors never quote the input.
func ParseRecoveryKey(s string) (*RecoveryKey, error) {
	squash := strings.NewReplacer("-", "", " ", "", "\t", "", "\n", "", "\r", "")
	body, ok := strings.CutPrefix(strings.ToUpper(squash.Replace(s)), strings.ToUpper(squash.Replace(recoveryPrefix)))
	if !ok {
		return nil, ErrRecoveryKeyFormat
	}
	raw, err := recoveryEncoding.DecodeString(body)
	if err != nil || len(raw) != recoveryKeyLen+recoveryCheckLen {
		return nil, ErrRecoveryKeyFormat
	}
	key, check := raw[:recoveryKeyLen], raw[recoveryKeyLen:]
	if subtle.ConstantTimeCompare(check, recoveryChecksum(key)) != 1 {
		return nil, ErrRecoveryKeyTypo
	}
	return &RecoveryKey{key: key}, nil
}

const (
	recoveryFileType    = "stratum.datakey.recovery"
	recoveryFileVersion = 1
	recoveryKDF         = "hkdf-sha256"
	recoveryAEAD        = "xchacha20poly1305"
	recoverySaltLen     = 32
	// maxRecoveryFile is far above a real file (about 250 bytes).
	maxRecoveryFile = 4096
)

// recoveryFile is the on-disk shape of DIR/data.key.recovery: JSON, so an
// operator can see what it is with cat.
type recoveryFile struct {
	Type       string `json:"type"`
	Version    int    `json:"version"`
	KDF        string `json:"kdf"`
	AEAD       string `json:"aead"`
	Salt       []byte `json:"salt"`
	WrappedKey []byte `json:"wrapped_key"`
}

// wrappingKey derives the key that encrypts the data key.
func (r *RecoveryKey) wrappingKey(salt []byte) (*DataKey, error) {
	k, err := hkdf.Key(sha256.New, r.key, salt, "stratum data-key recovery v1", chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	return &DataKey{key: k}, nil
}

// recoveryAD binds the header fields to the ciphertext, so an edited salt
// or version fails to open instead of being misread.
func recoveryAD(salt []byte) []byte {
	return fmt.Appendf(nil, "%s v%d %s %s %x", recoveryFileType, recoveryFileVersion, recoveryKDF, recoveryAEAD, salt)
}

// WrapDataKey returns the recovery file: dk encrypted under a key derived
// from r.
func WrapDataKey(dk *DataKey, r *RecoveryKey) ([]byte, error) {
	salt := make([]byte, recoverySaltLen)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	kek, err := r.wrappingKey(salt)
	if err != nil {
		return nil, err
	}
	wrapped, err := kek.Seal(dk.key, recoveryAD(salt))
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(recoveryFile{
		Type: recoveryFileType, Version: recoveryFileVersion, KDF: recoveryKDF, AEAD: recoveryAEAD,
		Salt: salt, WrappedKey: wrapped,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// ErrBadRecoveryFile prefixes every parse failure of a recovery file.
var ErrBadRecoveryFile = errors.New("invalid recovery file")

func badRecoveryFile(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRecoveryFile, fmt.Sprintf(format, args...))
}

// parseRecoveryFile validates everything that can be checked without the
// recovery key.
func parseRecoveryFile(data []byte) (*recoveryFile, error) {
	if len(data) > maxRecoveryFile {
		return nil, badRecoveryFile("%d bytes, more than %d", len(data), maxRecoveryFile)
	}
	var f recoveryFile
	if err := strictjson.Decode(data, &f); err != nil {
		return nil, badRecoveryFile("%v", err)
	}
	switch {
	case f.Type != recoveryFileType:
		return nil, badRecoveryFile("type %q, want %q", f.Type, recoveryFileType)
	case f.Version != recoveryFileVersion:
		return nil, badRecoveryFile("format version %d, this stratum reads %d", f.Version, recoveryFileVersion)
	case f.KDF != recoveryKDF || f.AEAD != recoveryAEAD:
		return nil, badRecoveryFile("kdf %q / aead %q, want %q / %q", f.KDF, f.AEAD, recoveryKDF, recoveryAEAD)
	case len(f.Salt) != recoverySaltLen:
		return nil, badRecoveryFile("salt is %d bytes, want %d", len(f.Salt), recoverySaltLen)
	case len(f.WrappedKey) != chacha20poly1305.NonceSizeX+chacha20poly1305.KeySize+chacha20poly1305.Overhead:
		return nil, badRecoveryFile("wrapped key is %d bytes", len(f.WrappedKey))
	}
	return &f, nil
}

// UnwrapDataKey opens a recovery file with r. A well-formed key that does
// not open it gives ErrWrongRecoveryKey; a damaged file ErrBadRecoveryFile.
func UnwrapDataKey(file []byte, r *RecoveryKey) (*DataKey, error) {
	f, err := parseRecoveryFile(file)
	if err != nil {
		return nil, err
	}
	kek, err := r.wrappingKey(f.Salt)
	if err != nil {
		return nil, err
	}
	raw, err := kek.Open(f.WrappedKey, recoveryAD(f.Salt))
	if err != nil {
		return nil, ErrWrongRecoveryKey
	}
	defer clear(raw)
	return NewDataKey(raw)
}
