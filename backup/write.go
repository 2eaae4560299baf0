package backup

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"

	"stratum/crypto"
)

// Options say how a snapshot is written.
type Options struct {
	// Recipients encrypt the snapshot; none writes the plain zstd stream.
	Recipients []age.Recipient
	// DataKey, when set, travels inside the encrypted snapshot.
	DataKey *crypto.DataKey
}

// ErrDataKeyNeedsRecipients: the data key never goes into a plain file.
var ErrDataKeyNeedsRecipients = errors.New("--include-data-key needs at least one --recipient: the data key only travels inside an encrypted backup")

// Check refuses options that would leak the data key.
func (o Options) Check() error {
	if o.DataKey != nil && len(o.Recipients) == 0 {
		return ErrDataKeyNeedsRecipients
	}
	return nil
}

// Snapshot writes the store's zstd snapshot to w and returns how many
// bytes of store it wrote.
type Snapshot func(w io.Writer) (int64, error)

// Write writes a snapshot file to w as o asks.
func Write(w io.Writer, o Options, snap Snapshot) (int64, error) {
	if err := o.Check(); err != nil {
		return 0, err
	}
	if len(o.Recipients) == 0 {
		return snap(w)
	}
	aw, err := age.Encrypt(w, o.Recipients...)
	if err != nil {
		return 0, fmt.Errorf("encrypt backup: %w", err)
	}
	hdr := header(o.DataKey)
	_, err = aw.Write(hdr)
	clear(hdr)
	if err != nil {
		return 0, err
	}
	n, err := snap(aw)
	if err != nil {
		return n, err
	}
	// Close writes the final, authenticated chunk: without it the file
	// reads as truncated.
	return n, aw.Close()
}

const (
	magicLine   = "stratum-backup v1"
	dataKeyWord = "data-key"
)

func header(dk *crypto.DataKey) []byte {
	b := []byte(magicLine + "\n")
	if dk != nil {
		raw := dk.Bytes()
		b = append(b, dataKeyWord+" "...)
		b = base64.StdEncoding.AppendEncode(b, raw)
		b = append(b, '\n')
		clear(raw)
	}
	return append(b, '\n')
}
