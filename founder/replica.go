package founder

import (
	"errors"
	"io/fs"
	"os"

	"stratum/crypto"
)

// prepareReplica gives a further replica of a shared store what init
// gave the first one's directory: the release directories and its own
// ca.pem, written from the database.
func (f *Founder) prepareReplica() error {
	d := f.opts.Data
	for _, sub := range []string{d.Releases(), d.ReleaseKeys()} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
	}
	if _, err := os.Stat(d.CACert()); errors.Is(err, fs.ErrNotExist) {
		return crypto.WriteFileAtomic(d.CACert(), f.ca.CertPEM(), 0o644)
	} else if err != nil {
		return err
	}
	return nil
}
