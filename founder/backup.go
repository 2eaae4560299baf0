package founder

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"stratum/backup"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/semver"
	"stratum/store"
)

// BackupRequest is what `stratum backup` asks for, from a running founder
// (as the control socket's JSON body) or from a stopped one's files.
type BackupRequest struct {
	// Recipients are age public keys (age1...) to encrypt to.
	Recipients []string `json:"recipients,omitempty"`
	// IncludeDataKey puts the data key inside the encrypted backup.
	IncludeDataKey bool `json:"includeDataKey,omitempty"`
	// ExcludeReleases leaves the release files out (SPEC 18): a restore
	// then lists those releases as missing until they are imported again.
	ExcludeReleases bool `json:"excludeReleases,omitempty"`
}

// options turns the request into backup options under the data key dk.
func (r BackupRequest) options(dk *crypto.DataKey) (backup.Options, error) {
	recips, err := backup.ParseRecipients(r.Recipients)
	if err != nil {
		return backup.Options{}, err
	}
	o := backup.Options{Recipients: recips, MACKey: dk}
	if r.IncludeDataKey {
		if len(recips) == 0 {
			return backup.Options{}, backup.ErrDataKeyNeedsRecipients
		}
		o.DataKey = dk
	}
	return o, nil
}

// writeBackup writes a complete backup of db and d (SPEC 18): the store,
// ca.pem, release-keys/ and, unless excluded, the release files, each
// streamed from disk.
func writeBackup(w io.Writer, db *store.DB, d DataDir, o backup.Options, excludeReleases bool) (int64, error) {
	var n int64
	err := db.Snapshot(func(tx *store.Tx, size int64, writeStore func(io.Writer) error) error {
		id, err := cluster.LoadIdentity(tx)
		if err != nil {
			return err
		}
		pin, err := cluster.CAPin(tx)
		if err != nil {
			return err
		}
		files, err := d.backupFiles(excludeReleases)
		if err != nil {
			return err
		}
		m := backup.Meta{ClusterID: id.ClusterID, CAPin: pin, StoreBytes: size, Bytes: size, Files: 1 + len(files)}
		for _, f := range files {
			m.Bytes += f.size
		}
		n, err = backup.Write(w, o, m, func(a *backup.Archive) error {
			if err := a.Add(backup.StoreEntry, size, writeStore); err != nil {
				return err
			}
			for _, f := range files {
				if err := a.Add(f.name, f.size, f.copy); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	return n, err
}

// backupFile is a file of the data directory that goes into a backup.
type backupFile struct {
	name string // the entry name, slash-separated, relative to the directory
	path string
	size int64
}

func (f backupFile) copy(w io.Writer) error {
	in, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = io.Copy(w, io.LimitReader(in, f.size+1))
	return err
}

// backupFiles lists ca.pem, release-keys/* and the trees of releases/
// (release directories only: an import in progress or set aside is not
// a release).
func (d DataDir) backupFiles(excludeReleases bool) ([]backupFile, error) {
	var out []backupFile
	add := func(name, path string) error {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if st.Mode().IsRegular() {
			out = append(out, backupFile{name: name, path: path, size: st.Size()})
		}
		return nil
	}
	if err := add(backup.CAEntry, d.CACert()); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	keys, err := os.ReadDir(d.ReleaseKeys())
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, k := range keys {
		if err := add(backup.ReleaseKeysEntry+k.Name(), filepath.Join(d.ReleaseKeys(), k.Name())); err != nil {
			return nil, err
		}
	}
	if excludeReleases {
		return out, nil
	}
	rels, err := os.ReadDir(d.Releases())
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, r := range rels {
		if !r.IsDir() || semver.Valid(r.Name()) != nil {
			continue
		}
		root := filepath.Join(d.Releases(), r.Name())
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(d.Releases(), p)
			if err != nil {
				return err
			}
			return add(backup.ReleasesEntry+filepath.ToSlash(rel), p)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BackupStopped writes a backup of a stopped founder to out (atomically,
// mode 0600). ks finds the data key, which keys the backup's MACs.
func BackupStopped(d DataDir, ks KeySource, req BackupRequest, out string) (int64, error) {
	if !d.Initialized() {
		return 0, fmt.Errorf("no founder store to back up in %s (stratum.db is not there)", d)
	}
	dk, err := d.LoadDataKey(ks)
	if err != nil {
		return 0, err
	}
	o, err := req.options(dk)
	if err != nil {
		return 0, err
	}
	db, err := store.OpenReadOnly(d.DB(), dk)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = crypto.WriteFileAtomicFunc(out, 0o600, func(w io.Writer) error {
		var werr error
		n, werr = writeBackup(w, db, d, o, req.ExcludeReleases)
		return werr
	})
	return n, err
}
