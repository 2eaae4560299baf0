package backup

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/klauspost/compress/zstd"

	"stratum/crypto"
)

// Errors a restore reports; none of them quotes file contents.
var (
	// ErrNeedIdentity: the backup is encrypted and no identity was given.
	ErrNeedIdentity = errors.New("this backup is encrypted: give --identity FILE with an age identity of one of its recipients")
	// ErrNotEncrypted: an identity was given for a plain backup.
	ErrNotEncrypted = errors.New("this backup is not encrypted: restore it without --identity")
	// ErrWrongIdentity: no identity given opens the backup.
	ErrWrongIdentity = errors.New("none of the given identities opens this backup (it was encrypted to other keys, or its header was altered)")
	// ErrDamaged: the file is truncated, edited or not a backup at all.
	ErrDamaged = errors.New("the backup is damaged, truncated or was tampered with")
	// ErrNotBackup: neither a backup nor an age file.
	ErrNotBackup = errors.New("not a stratum backup (neither a plain one nor an age-encrypted one)")
	// ErrNotAuthentic: a MAC does not verify under the data key.
	ErrNotAuthentic = errors.New("the backup's MAC does not verify under this data key: it was not written by this cluster's founder, or it was altered")
	// ErrTooLarge: the body decompresses to more than the header says.
	ErrTooLarge = errors.New("the backup decompresses to more than its header announces: refused")
	// ErrOldFormat: a backup of an earlier build, without a MAC.
	ErrOldFormat = errors.New("this backup was written by an earlier build, without a MAC (SPEC 16.4): it cannot be authenticated; restore it with the build that wrote it, start that founder, and take a new backup")
)

var (
	zstdMagic  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	ageMagic   = []byte("age-encryption.org/")
	armorMagic = []byte("-----BEGIN AGE ENCRYPTED FILE-----")
	plainMagic = []byte("stratum-backup v")
)

// maxHeader bounds the plaintext header; a real one is a few hundred bytes.
const maxHeader = 4096

// Contents is an opened backup. Its header (Meta, DataKey) is read but not
// trusted until Authenticate succeeds; Next then yields the entries, and
// Finish checks the MAC over everything.
type Contents struct {
	Encrypted bool
	// DataKey is the key the backup carried, or nil.
	DataKey *crypto.DataKey
	Meta    Meta

	r      *bufio.Reader
	lines  []byte // the header lines the header MAC covers
	all    []byte // every header byte, for the final MAC
	gotMAC []byte

	fr    *frameReader
	zr    *zstd.Decoder
	body  *boundedReader
	tr    *tar.Reader
	files int
	bytes int64
	ended bool
}

// Open reads a backup's framing: plain or encrypted (with identities), and
// its header.
func Open(r io.Reader, identities []age.Identity) (*Contents, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(armorMagic))
	switch {
	case bytes.HasPrefix(head, zstdMagic):
		return nil, ErrOldFormat
	case bytes.HasPrefix(head, plainMagic):
		if len(identities) > 0 {
			return nil, ErrNotEncrypted
		}
		c := &Contents{r: br}
		return c, c.readHeader(false)
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
	c := &Contents{Encrypted: true, r: bufio.NewReader(&ageErrors{plain})}
	return c, c.readHeader(true)
}

// ageErrors maps age's read failures to ErrDamaged.
type ageErrors struct{ r io.Reader }

func (a *ageErrors) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return n, err
}

// readHeader parses the header. Its lines are never echoed in an error:
// one of them is the data key.
func (c *Contents) readHeader(encrypted bool) error {
	budget := maxHeader
	line := func() ([]byte, error) {
		var b []byte
		for {
			if budget == 0 {
				return nil, fmt.Errorf("%w: the header is over %d bytes", ErrDamaged, maxHeader)
			}
			budget--
			ch, err := c.r.ReadByte()
			if err == io.EOF {
				return nil, fmt.Errorf("%w: the header ends early", ErrDamaged)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
			}
			c.all = append(c.all, ch)
			if ch == '\n' {
				return b, nil
			}
			b = append(b, ch)
		}
	}
	first, err := line()
	if err != nil {
		return err
	}
	switch string(first) {
	case magicLine:
	case oldMagic:
		return ErrOldFormat
	default:
		return fmt.Errorf("%w: not a stratum backup of a version this binary reads", ErrDamaged)
	}
	fields := map[string]string{}
	order := []string{dataKeyWord, "cluster", "ca-pin", "store-bytes", "bytes", "files", "header-mac"}
	next := 0
	for {
		l, err := line()
		if err != nil {
			return err
		}
		if len(l) == 0 {
			break
		}
		word, value, _ := bytes.Cut(l, []byte(" "))
		for next < len(order) && order[next] != string(word) {
			next++
		}
		if next == len(order) {
			return fmt.Errorf("%w: unknown or repeated header line", ErrDamaged)
		}
		next++
		if string(word) == dataKeyWord {
			if !encrypted {
				return fmt.Errorf("%w: a plain backup carries a data key", ErrDamaged)
			}
			raw := make([]byte, base64.StdEncoding.DecodedLen(len(value)))
			n, err := base64.StdEncoding.Strict().Decode(raw, value)
			if err == nil {
				c.DataKey, err = crypto.NewDataKey(raw[:n])
			}
			clear(raw)
			clear(l)
			if err != nil {
				return fmt.Errorf("%w: the data key line is malformed", ErrDamaged)
			}
			continue
		}
		fields[string(word)] = string(value)
		if string(word) == "header-mac" {
			c.lines = c.all[:len(c.all)-len(l)-1]
		}
	}
	num := func(name string) (int64, error) {
		n, err := strconv.ParseInt(fields[name], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: header line %s is malformed", ErrDamaged, name)
		}
		return n, nil
	}
	m := Meta{ClusterID: fields["cluster"], CAPin: fields["ca-pin"]}
	var files int64
	if m.StoreBytes, err = num("store-bytes"); err == nil {
		if m.Bytes, err = num("bytes"); err == nil {
			files, err = num("files")
		}
	}
	if err != nil {
		return err
	}
	if files > 1<<24 || m.StoreBytes > m.Bytes {
		return fmt.Errorf("%w: header sizes are inconsistent", ErrDamaged)
	}
	m.Files = int(files)
	if c.gotMAC, err = hex.DecodeString(fields["header-mac"]); err != nil || len(c.gotMAC) != sha256.Size || c.lines == nil {
		return fmt.Errorf("%w: the header MAC is missing or malformed", ErrDamaged)
	}
	c.Meta = m
	return nil
}

// Authenticate checks the header's MAC with key (the data key the
// restore will use) and readies the body.
func (c *Contents) Authenticate(key *crypto.DataKey) error {
	macKey, err := key.DeriveKey(macPurpose)
	if err != nil {
		return err
	}
	if !hmac.Equal(headerMAC(macKey, c.lines), c.gotMAC) {
		return ErrNotAuthentic
	}
	mac := hmac.New(sha256.New, macKey)
	mac.Write(c.all)
	c.fr = &frameReader{r: c.r, mac: mac}
	// The tar stream is the entries, a header (at most a few blocks with
	// PAX records) and padding each, and the end marker.
	limit := c.Meta.Bytes + int64(c.Meta.Files+1)*8192
	c.zr, err = zstd.NewReader(c.fr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(32<<20))
	if err != nil {
		return err
	}
	c.body = &boundedReader{r: c.zr, left: limit}
	c.tr = tar.NewReader(c.body)
	return nil
}

// Entry is one file of the body; Reader yields its Size bytes.
type Entry struct {
	Name string
	Size int64
	io.Reader
}

// Next returns the next entry, or io.EOF after the last. The first entry
// is always the store, of the size the header says.
func (c *Contents) Next() (*Entry, error) {
	if c.tr == nil {
		return nil, errors.New("backup: Next before Authenticate")
	}
	h, err := c.tr.Next()
	if err == io.EOF {
		if c.files != c.Meta.Files || c.bytes != c.Meta.Bytes {
			return nil, fmt.Errorf("%w: %d files of %d bytes, the header announces %d of %d", ErrDamaged, c.files, c.bytes, c.Meta.Files, c.Meta.Bytes)
		}
		c.ended = true
		return nil, io.EOF
	}
	if err != nil {
		return nil, c.bodyError(err)
	}
	c.files++
	c.bytes += h.Size
	switch {
	case h.Typeflag != tar.TypeReg || h.Size < 0:
		return nil, fmt.Errorf("%w: entry %d is not a regular file", ErrDamaged, c.files)
	case c.files > c.Meta.Files || c.bytes > c.Meta.Bytes:
		return nil, fmt.Errorf("%w: (more files or bytes than announced)", ErrTooLarge)
	case c.files == 1 && (h.Name != StoreEntry || h.Size != c.Meta.StoreBytes):
		return nil, fmt.Errorf("%w: the first entry is not the store of the announced size", ErrDamaged)
	}
	return &Entry{Name: h.Name, Size: h.Size, Reader: &bodyErrors{c: c, r: c.tr}}, nil
}

func (c *Contents) bodyError(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrDamaged) || errors.Is(err, ErrNotAuthentic) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrDamaged, err)
}

type bodyErrors struct {
	c *Contents
	r io.Reader
}

func (b *bodyErrors) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = b.c.bodyError(err)
	}
	return n, err
}

// Finish reads what is left after the last entry and checks the MAC over
// the whole backup; nothing may follow it.
func (c *Contents) Finish() error {
	defer c.Close()
	if !c.ended {
		return errors.New("backup: Finish before the last entry")
	}
	if _, err := io.Copy(io.Discard, c.body); err != nil {
		return c.bodyError(err)
	}
	if _, err := io.Copy(io.Discard, c.fr); err != nil {
		return c.bodyError(err)
	}
	n, err := io.Copy(io.Discard, c.r)
	if err != nil {
		return c.bodyError(err)
	}
	if n > 0 {
		return fmt.Errorf("%w: %d bytes follow the backup", ErrDamaged, n)
	}
	return nil
}

// Close releases the decompressor.
func (c *Contents) Close() {
	if c.zr != nil {
		c.zr.Close()
	}
}

// frameReader yields the frames' bytes and, at the end marker, checks the
// final MAC.
type frameReader struct {
	r    *bufio.Reader
	mac  hash.Hash
	left int
	done bool
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.done {
		return 0, io.EOF
	}
	if f.left == 0 {
		var l [4]byte
		if _, err := io.ReadFull(f.r, l[:]); err != nil {
			return 0, fmt.Errorf("%w: it ends inside the body", ErrDamaged)
		}
		n := binary.BigEndian.Uint32(l[:])
		if n > maxFrame {
			return 0, fmt.Errorf("%w: a frame of %d bytes", ErrDamaged, n)
		}
		if n == 0 {
			got := make([]byte, sha256.Size)
			if _, err := io.ReadFull(f.r, got); err != nil {
				return 0, fmt.Errorf("%w: it ends before its MAC", ErrDamaged)
			}
			if !hmac.Equal(got, f.mac.Sum(nil)) {
				return 0, ErrNotAuthentic
			}
			f.done = true
			return 0, io.EOF
		}
		f.left = int(n)
	}
	p = p[:min(len(p), f.left)]
	n, err := f.r.Read(p)
	f.mac.Write(p[:n])
	f.left -= n
	if err == io.EOF {
		err = fmt.Errorf("%w: it ends inside a frame", ErrDamaged)
	}
	return n, err
}

// boundedReader refuses to yield more than left bytes.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte means the stream is larger than announced.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, ErrTooLarge
		}
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.left)]
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
