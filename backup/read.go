package backup

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
	"filippo.io/age/armor"

	"stratum/crypto"
)

// Errors a restore reports; none of them quotes file contents.
var (
	// ErrNeedIdentity: the snapshot is encrypted and no identity was given.
	ErrNeedIdentity = errors.New("this backup is encrypted: give --identity FILE with an age identity of one of its recipients")
	// ErrNotEncrypted: an identity was given for a plain snapshot.
	ErrNotEncrypted = errors.New("this backup is not encrypted: restore it without --identity")
	// ErrWrongIdentity: no identity given opens the snapshot.
	ErrWrongIdentity = errors.New("none of the given identities opens this backup (it was encrypted to other keys, or its header was altered)")
	// ErrDamaged: the file is truncated, edited or not a snapshot at all.
	ErrDamaged = errors.New("the backup is damaged, truncated or was tampered with")
	// ErrNotBackup: neither a zstd snapshot nor an age file.
	ErrNotBackup = errors.New("not a stratum backup (neither a zstd snapshot nor an age-encrypted one)")
)

var (
	zstdMagic  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	ageMagic   = []byte("age-encryption.org/")
	armorMagic = []byte("-----BEGIN AGE ENCRYPTED FILE-----")
)

// maxHeader bounds the plaintext header; a real one is under 100 bytes.
const maxHeader = 4096

// Contents is an opened snapshot file. Read yields the zstd snapshot;
// after the store has consumed it, Finish must succeed before the restore
// is trusted.
type Contents struct {
	Encrypted bool
	// DataKey is the key the snapshot carried, or nil.
	DataKey *crypto.DataKey
	r       *bufio.Reader
}

// Read reads the zstd snapshot, mapping decryption failures to ErrDamaged.
func (c *Contents) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF && c.Encrypted {
		err = fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return n, err
}

// Finish reads what the snapshot's consumer left: an encrypted file is
// authenticated to its last chunk, and nothing may follow the snapshot.
func (c *Contents) Finish() error {
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: %d bytes follow the snapshot", ErrDamaged, n)
	}
	return nil
}

// Open reads a snapshot file's framing: plain or encrypted (with
// identities), and the header of an encrypted one.
func Open(r io.Reader, identities []age.Identity) (*Contents, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(armorMagic))
	switch {
	case bytes.HasPrefix(head, zstdMagic):
		if len(identities) > 0 {
			return nil, ErrNotEncrypted
		}
		return &Contents{r: br}, nil
	case bytes.HasPrefix(head, ageMagic), bytes.HasPrefix(head, armorMagic):
	default:
		return nil, ErrNotBackup
	}
	if len(identities) == 0 {
		return nil, ErrNeedIdentity
	}
	var src io.Reader = br
	if bytes.HasPrefix(head, armorMagic) {
		src = armor.NewReader(br)
	}
	plain, err := age.Decrypt(src, identities...)
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return nil, ErrWrongIdentity
		}
		return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	c := &Contents{Encrypted: true, r: bufio.NewReader(plain)}
	if c.DataKey, err = readHeader(c.r); err != nil {
		return nil, err
	}
	return c, nil
}

// readHeader parses the plaintext header. Its lines are never echoed in
// an error: one of them is the data key.
func readHeader(r *bufio.Reader) (*crypto.DataKey, error) {
	budget := maxHeader
	line := func() ([]byte, error) {
		var b []byte
		for {
			if budget == 0 {
				return nil, fmt.Errorf("%w: the header is over %d bytes", ErrDamaged, maxHeader)
			}
			budget--
			ch, err := r.ReadByte()
			if err == io.EOF {
				return nil, fmt.Errorf("%w: the header ends early", ErrDamaged)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
			}
			if ch == '\n' {
				return b, nil
			}
			b = append(b, ch)
		}
	}
	first, err := line()
	if err != nil {
		return nil, err
	}
	if string(first) != magicLine {
		return nil, fmt.Errorf("%w: it decrypts, but not to a stratum backup of a version this binary reads", ErrDamaged)
	}
	var dk *crypto.DataKey
	for {
		l, err := line()
		if err != nil {
			return nil, err
		}
		if len(l) == 0 {
			return dk, nil
		}
		value, ok := bytes.CutPrefix(l, []byte(dataKeyWord+" "))
		if !ok {
			return nil, fmt.Errorf("%w: unknown header line", ErrDamaged)
		}
		if dk != nil {
			return nil, fmt.Errorf("%w: the data key is given twice", ErrDamaged)
		}
		raw := make([]byte, base64.StdEncoding.DecodedLen(len(value)))
		n, err := base64.StdEncoding.Strict().Decode(raw, value)
		if err == nil {
			dk, err = crypto.NewDataKey(raw[:n])
		}
		clear(raw)
		clear(l)
		if err != nil {
			return nil, fmt.Errorf("%w: the data key line is malformed", ErrDamaged)
		}
	}
}
