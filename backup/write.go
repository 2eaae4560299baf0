package backup

import (
	"archive/tar"
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
	"github.com/klauspost/compress/zstd"

	"stratum/crypto"
)

// Options say how a backup is written.
type Options struct {
	// Recipients encrypt the backup; none writes it plain.
	Recipients []age.Recipient
	// DataKey, when set, travels inside the encrypted backup.
	DataKey *crypto.DataKey
	// MACKey is the founder's data key: the MACs are keyed by a key
	// derived from it. Required.
	MACKey *crypto.DataKey
}

// ErrDataKeyNeedsRecipients: the data key never goes into a plain file.
var ErrDataKeyNeedsRecipients = errors.New("--include-data-key needs at least one --recipient: the data key only travels inside an encrypted backup")

// Check refuses options that would leak the data key.
func (o Options) Check() error {
	if o.DataKey != nil && len(o.Recipients) == 0 {
		return ErrDataKeyNeedsRecipients
	}
	if o.MACKey == nil {
		return errors.New("backup: no data key to authenticate the backup with")
	}
	return nil
}

// Meta is the authenticated header: what the backup is of and how big
// its body may be.
type Meta struct {
	ClusterID  string
	CAPin      string
	StoreBytes int64 // the size of stratum.db
	Bytes      int64 // every entry's size, summed
	Files      int   // entries
}

// Names of the body's entries.
const (
	StoreEntry       = "stratum.db"
	CAEntry          = "ca.pem"
	ReleaseKeysEntry = "release-keys/"
	ReleasesEntry    = "releases/"
)

// Archive is the body being written: entries whose sizes must add up to
// the header's.
type Archive struct {
	tw    *tar.Writer
	meta  Meta
	bytes int64
	files int
}

// Add writes one entry of size bytes that fill writes.
func (a *Archive) Add(name string, size int64, fill func(io.Writer) error) error {
	a.files++
	a.bytes += size
	if a.files > a.meta.Files || a.bytes > a.meta.Bytes {
		return fmt.Errorf("backup: entry %s goes beyond the %d files / %d bytes the header announced", name, a.meta.Files, a.meta.Bytes)
	}
	mode := int64(0o644)
	if name == StoreEntry {
		mode = 0o600
	}
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: mode, Format: tar.FormatPAX}); err != nil {
		return err
	}
	cw := &countWriter{w: a.tw}
	if err := fill(cw); err != nil {
		return err
	}
	if cw.n != size {
		return fmt.Errorf("backup: %s changed while it was written (%d bytes, %d announced)", name, cw.n, size)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Write writes a backup to w: the header m, the entries body adds, the
// MAC. It returns the number of body bytes (before compression).
func Write(w io.Writer, o Options, m Meta, body func(*Archive) error) (int64, error) {
	if err := o.Check(); err != nil {
		return 0, err
	}
	macKey, err := o.MACKey.DeriveKey(macPurpose)
	if err != nil {
		return 0, err
	}
	out := w
	var aw io.WriteCloser
	if len(o.Recipients) > 0 {
		if aw, err = age.Encrypt(w, o.Recipients...); err != nil {
			return 0, fmt.Errorf("encrypt backup: %w", err)
		}
		out = aw
	}
	hdr := header(o.DataKey, m, macKey)
	_, err = out.Write(hdr)
	mac := hmac.New(sha256.New, macKey)
	mac.Write(hdr)
	clear(hdr)
	if err != nil {
		return 0, err
	}
	fw := &frameWriter{w: out, mac: mac, buf: make([]byte, 0, maxFrame)}
	zw, err := zstd.NewWriter(fw)
	if err != nil {
		return 0, err
	}
	a := &Archive{tw: tar.NewWriter(zw), meta: m}
	if err := body(a); err != nil {
		zw.Close()
		return a.bytes, err
	}
	if a.files != m.Files || a.bytes != m.Bytes {
		zw.Close()
		return a.bytes, fmt.Errorf("backup: %d files / %d bytes written, %d / %d announced", a.files, a.bytes, m.Files, m.Bytes)
	}
	if err := a.tw.Close(); err != nil {
		return a.bytes, err
	}
	if err := zw.Close(); err != nil {
		return a.bytes, err
	}
	if err := fw.close(); err != nil {
		return a.bytes, err
	}
	if aw != nil {
		// Close writes the final, authenticated chunk: without it the
		// file reads as truncated.
		return a.bytes, aw.Close()
	}
	return a.bytes, nil
}

// frameWriter cuts the body into length-prefixed frames and MACs them.
type frameWriter struct {
	w   io.Writer
	mac hash.Hash
	buf []byte
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), maxFrame-len(f.buf))
		f.buf = append(f.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(f.buf) == maxFrame {
			if err := f.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (f *frameWriter) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(f.buf)))
	if _, err := f.w.Write(l[:]); err != nil {
		return err
	}
	if _, err := f.w.Write(f.buf); err != nil {
		return err
	}
	f.mac.Write(f.buf)
	f.buf = f.buf[:0]
	return nil
}

func (f *frameWriter) close() error {
	if err := f.flush(); err != nil {
		return err
	}
	if _, err := f.w.Write([]byte{0, 0, 0, 0}); err != nil {
		return err
	}
	_, err := f.w.Write(f.mac.Sum(nil))
	return err
}

const (
	magicLine   = "stratum-backup v2"
	oldMagic    = "stratum-backup v1"
	dataKeyWord = "data-key"
	macPurpose  = "backup v2"
	maxFrame    = 64 << 10
)

// header is the header's bytes, its MAC line and the blank line included.
func header(dk *crypto.DataKey, m Meta, macKey []byte) []byte {
	b := []byte(magicLine + "\n")
	if dk != nil {
		raw := dk.Bytes()
		b = append(b, dataKeyWord+" "...)
		b = base64.StdEncoding.AppendEncode(b, raw)
		b = append(b, '\n')
		clear(raw)
	}
	b = append(b, "cluster "+m.ClusterID+"\n"...)
	b = append(b, "ca-pin "+m.CAPin+"\n"...)
	b = append(b, "store-bytes "+strconv.FormatInt(m.StoreBytes, 10)+"\n"...)
	b = append(b, "bytes "+strconv.FormatInt(m.Bytes, 10)+"\n"...)
	b = append(b, "files "+strconv.Itoa(m.Files)+"\n"...)
	b = append(b, "header-mac "+hex.EncodeToString(headerMAC(macKey, b))+"\n\n"...)
	return b
}

func headerMAC(macKey, lines []byte) []byte {
	m := hmac.New(sha256.New, macKey)
	m.Write([]byte("header\n"))
	m.Write(lines)
	return m.Sum(nil)
}
