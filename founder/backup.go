package founder

import (
	"errors"
	"fmt"
	"io"
	"os"

	"stratum/backup"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/store"
)

// BackupRequest is what `stratum backup` asks for, from a running founder
// (as the control socket's JSON body) or from a stopped one's files.
type BackupRequest struct {
	// Recipients are age public keys (age1...) to encrypt to.
	Recipients []string `json:"recipients,omitempty"`
	// IncludeDataKey puts the data key inside the encrypted snapshot.
	IncludeDataKey bool `json:"includeDataKey,omitempty"`
}

// options turns the request into backup options; dataKey is only asked
// for when the request wants the key included.
func (r BackupRequest) options(dataKey func() (*crypto.DataKey, error)) (backup.Options, error) {
	recips, err := backup.ParseRecipients(r.Recipients)
	if err != nil {
		return backup.Options{}, err
	}
	o := backup.Options{Recipients: recips}
	if r.IncludeDataKey {
		if len(recips) == 0 {
			return backup.Options{}, backup.ErrDataKeyNeedsRecipients
		}
		if o.DataKey, err = dataKey(); err != nil {
			return backup.Options{}, err
		}
	}
	return o, nil
}

// BackupStopped writes a snapshot of a stopped founder's store to out
// (atomically, mode 0600). ks finds the data key when it is included.
func BackupStopped(d DataDir, ks KeySource, req BackupRequest, out string) (int64, error) {
	o, err := req.options(func() (*crypto.DataKey, error) { return d.LoadDataKey(ks) })
	if err != nil {
		return 0, err
	}
	var n int64
	err = crypto.WriteFileAtomicFunc(out, 0o600, func(w io.Writer) error {
		var werr error
		n, werr = backup.Write(w, o, func(w io.Writer) (int64, error) { return store.SnapshotFile(d.DB(), w) })
		return werr
	})
	return n, err
}

// RestoreRequest says what to restore and where a carried data key goes.
type RestoreRequest struct {
	In         string
	Identities []string // age identity files
	// Keys: a data key carried in the snapshot is sealed to Keys.TPM when
	// set, else written to data.key.
	Keys KeySource
}

// RestoreResult is what restore prints.
type RestoreResult struct {
	Bytes     int64
	Encrypted bool
	// DataKey reports that the snapshot carried the data key and it was
	// installed; CAPin is then the restored CA's pin.
	DataKey     bool
	CAPin       string
	RecoveryKey *crypto.RecoveryKey
}

// Restore restores a snapshot into d, which must hold no store and no data
// key. Every check that can fail (identities, decryption, the TPM) runs
// before the first file is written, and a failure after that removes what
// the restore wrote, so a refused restore leaves d as it was.
func Restore(d DataDir, req RestoreRequest) (res RestoreResult, err error) {
	if d.Initialized() {
		return res, fmt.Errorf("%s exists: restore into an empty data directory", d.DB())
	}
	ids, err := backup.LoadIdentities(req.Identities)
	if err != nil {
		return res, err
	}
	f, err := os.Open(req.In)
	if err != nil {
		return res, err
	}
	defer f.Close()
	c, err := backup.Open(f, ids)
	if err != nil {
		return res, fmt.Errorf("%s: %w", req.In, err)
	}
	res.Encrypted = c.Encrypted
	if c.DataKey == nil && req.Keys.TPM != "" {
		return res, fmt.Errorf("%s carries no data key, so there is nothing to seal to the TPM: restore without --tpm and bring the original key files", req.In)
	}
	var key *preparedKey
	if c.DataKey != nil {
		if err := d.refuseKeyFiles(); err != nil {
			return res, fmt.Errorf("the backup carries its data key and %w", err)
		}
		if key, err = prepareDataKey(c.DataKey, req.Keys); err != nil {
			return res, err
		}
	}

	created, err := mkdirNew(string(d))
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			os.Remove(d.DB())
			if key != nil {
				d.removeKeyFiles()
			}
			if created {
				os.RemoveAll(string(d))
			}
		}
	}()
	if res.Bytes, err = store.RestoreReader(c, d.DB()); err != nil {
		return res, fmt.Errorf("%s: %w", req.In, err)
	}
	if err = c.Finish(); err != nil {
		return res, fmt.Errorf("%s: %w", req.In, err)
	}
	if key == nil {
		return res, nil
	}
	if res.CAPin, err = d.adoptRestoredKey(key); err != nil {
		return res, err
	}
	res.DataKey, res.RecoveryKey = true, key.recoveryKey
	return res, nil
}

// adoptRestoredKey proves the carried key opens the restored store's
// secrets, then writes it, ca.pem and the release directories, so the
// directory serves as it is.
func (d DataDir) adoptRestoredKey(key *preparedKey) (string, error) {
	db, err := store.Open(d.DB(), key.dk)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var ca *crypto.CA
	if err := db.View(func(tx *store.Tx) error {
		ca, err = cluster.LoadCA(tx)
		return err
	}); err != nil {
		return "", fmt.Errorf("the data key in the backup does not open the restored store: %w", err)
	}
	if err := key.write(d); err != nil {
		return "", err
	}
	if err := crypto.WriteFileAtomic(d.CACert(), ca.CertPEM(), 0o644); err != nil {
		return "", err
	}
	for _, sub := range []string{d.Releases(), d.ReleaseKeys()} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return "", err
		}
	}
	return ca.Pin(), nil
}

// mkdirNew creates dir (0700) and reports whether it did, so a failed
// restore removes only a directory it made.
func mkdirNew(dir string) (bool, error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	return true, os.MkdirAll(dir, 0o700)
}
