package founder

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"stratum/backup"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/semver"
	"stratum/store"
)

// RestoreRequest says what to restore and how it is checked.
type RestoreRequest struct {
	In         string
	Identities []string // age identity files
	// Keys: a data key carried in the backup is sealed to Keys.TPM when
	// set, else written to data.key. A backup without one is checked and
	// opened with the directory's own key (found as Keys says).
	Keys KeySource
	// CAPin is the CA pin the operator expects (sha256:...); without it
	// the directory's ca.pem says which cluster may be restored, and with
	// neither only NewCluster lets a restore write.
	CAPin      string
	NewCluster bool
	// Show, when set, hears the backup's cluster and CA pin as soon as
	// its header is authenticated, before anything is written.
	Show func(clusterID, caPin string)
}

// RestoreResult is what restore prints.
type RestoreResult struct {
	Bytes     int64
	Encrypted bool
	ClusterID string
	CAPin     string
	// Releases and ReleaseFiles count the release trees restored.
	Releases, ReleaseFiles int
	// DataKey reports that the backup carried the data key and it was
	// installed.
	DataKey     bool
	RecoveryKey *crypto.RecoveryKey
}

// Restore restores a backup into d, which must hold no store (SPEC 16.4,
// 18). Nothing is written before the backup's header MAC verifies under
// the data key the restore will use (the one it carries, or d's) and its
// CA pin matches the expected one; the body is unpacked into a staging
// directory, bounded by the header's sizes, its final MAC checked, the
// store passed through bbolt's consistency check and opened with the key,
// and only then moved into place. A refused restore leaves d as it was.
func Restore(d DataDir, req RestoreRequest) (res RestoreResult, err error) {
	if d.Initialized() {
		return res, fmt.Errorf("%s exists: restore into a data directory without a store", d.DB())
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
	defer c.Close()
	res.Encrypted = c.Encrypted
	key := c.DataKey
	if key != nil {
		if err := d.refuseKeyFiles(); err != nil {
			return res, fmt.Errorf("the backup carries its data key and %w", err)
		}
	} else if key, err = d.LoadDataKey(req.Keys); err != nil {
		return res, fmt.Errorf("%s carries no data key, so it is checked and opened with this directory's: %w", req.In, err)
	}
	if err := c.Authenticate(key); err != nil {
		return res, fmt.Errorf("%s: %w", req.In, err)
	}
	res.ClusterID, res.CAPin = c.Meta.ClusterID, c.Meta.CAPin
	if req.Show != nil {
		req.Show(res.ClusterID, res.CAPin)
	}
	if err := d.checkRestorePin(c.Meta, req); err != nil {
		return res, err
	}
	var prepared *preparedKey
	if c.DataKey != nil {
		if prepared, err = prepareDataKey(key, req.Keys); err != nil {
			return res, err
		}
	}

	created, err := mkdirNew(string(d))
	if err != nil {
		return res, err
	}
	stage, err := os.MkdirTemp(string(d), ".restore-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(stage)
	defer func() {
		if err != nil {
			if prepared != nil {
				d.removeKeyFiles()
			}
			if created {
				os.RemoveAll(string(d))
			}
		}
	}()
	st, err := unpack(c, stage)
	if err != nil {
		return res, fmt.Errorf("%s: %w", req.In, err)
	}
	res.Bytes, res.Releases, res.ReleaseFiles = c.Meta.StoreBytes, len(st.releases), st.releaseFiles
	staged := filepath.Join(stage, backup.StoreEntry)
	if err := store.CheckFile(staged); err != nil {
		return res, fmt.Errorf("%s: the restored store is damaged, nothing was restored: %w", req.In, err)
	}
	caPEM, err := checkRestoredStore(staged, key, c.Meta, filepath.Base(req.In))
	if err != nil {
		return res, fmt.Errorf("%s: %w", req.In, err)
	}

	// Everything checked: move it into place, the store last (a restore
	// cut short is run again; it only refuses once the store is there).
	if prepared != nil {
		if err := prepared.write(d); err != nil {
			return res, err
		}
		res.DataKey, res.RecoveryKey = true, prepared.recoveryKey
	}
	if err := crypto.WriteFileAtomic(d.CACert(), caPEM, 0o644); err != nil {
		return res, err
	}
	if err := st.install(d); err != nil {
		return res, err
	}
	if err := os.Rename(staged, d.DB()); err != nil {
		return res, err
	}
	syncDir(string(d))
	return res, nil
}

// checkRestorePin refuses a backup of another cluster than the expected
// one, before anything is written.
func (d DataDir) checkRestorePin(m backup.Meta, req RestoreRequest) error {
	want, from := req.CAPin, "--ca-pin"
	if want == "" {
		if b, err := os.ReadFile(d.CACert()); err == nil {
			cert, err := crypto.ParseCertPEM(b)
			if err != nil {
				return fmt.Errorf("%s: %w", d.CACert(), err)
			}
			want, from = crypto.SPKIPin(cert), d.CACert()
		}
	}
	switch {
	case want == "" && req.NewCluster:
		return nil
	case want == "":
		return fmt.Errorf("this backup is of cluster %s, CA pin %s; nothing was written: pass --ca-pin %s if that is the cluster you mean to restore, or --new-cluster",
			m.ClusterID, m.CAPin, m.CAPin)
	case want != m.CAPin:
		return fmt.Errorf("this backup is of cluster %s, CA pin %s, not of the cluster whose CA pin is %s (%s): refused, nothing was written",
			m.ClusterID, m.CAPin, want, from)
	}
	return nil
}

// checkRestoredStore opens the staged store with the key and checks it is
// the cluster the header named; it returns the CA certificate. The store
// is then marked restored from backupName: its founder starts isolated
// until an operator takes it over (cluster.RestoreMark).
func checkRestoredStore(path string, key *crypto.DataKey, m backup.Meta, backupName string) ([]byte, error) {
	db, err := store.Open(path, key)
	if err != nil {
		return nil, fmt.Errorf("the restored store does not open: %w", err)
	}
	defer db.Close()
	var ca *crypto.CA
	var id cluster.Identity
	if err := db.View(func(tx *store.Tx) error {
		if id, err = cluster.LoadIdentity(tx); err != nil {
			return err
		}
		ca, err = cluster.LoadCA(tx)
		return err
	}); err != nil {
		return nil, fmt.Errorf("the data key does not open the restored store's CA: %w", err)
	}
	if id.ClusterID != m.ClusterID || ca.Pin() != m.CAPin {
		return nil, fmt.Errorf("the restored store is cluster %s with CA pin %s, not what the backup's header says (%s, %s)", id.ClusterID, ca.Pin(), m.ClusterID, m.CAPin)
	}
	if err := db.Update(func(tx *store.Tx) error { return cluster.MarkRestored(tx, backupName, time.Now()) }); err != nil {
		return nil, fmt.Errorf("marking the restored store isolated: %w", err)
	}
	return ca.CertPEM(), nil
}

// staged is what unpack wrote beside the store.
type staged struct {
	dir          string
	keys         []string // release-keys/ file names
	releases     []string // releases/ tree names
	releaseFiles int
}

// unpack writes the body's entries into stage, each name checked, and
// checks the final MAC.
func unpack(c *backup.Contents, stage string) (*staged, error) {
	st := &staged{dir: stage}
	seenRelease := map[string]bool{}
	for {
		e, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		target, mode, err := st.place(e.Name, seenRelease)
		if err != nil {
			return nil, err
		}
		if target == "" { // ca.pem: the store's own certificate is written
			if _, err := io.Copy(io.Discard, io.LimitReader(e, 1<<20)); err != nil {
				return nil, err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, err
		}
		if err := writeEntry(target, mode, e); err != nil {
			return nil, err
		}
	}
	return st, c.Finish()
}

func writeEntry(target string, mode os.FileMode, e *backup.Entry) error {
	out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("%w: entry %s given twice or unwritable: %v", backup.ErrDamaged, e.Name, err)
	}
	n, err := io.Copy(out, e)
	if err == nil && n != e.Size {
		err = fmt.Errorf("%w: entry %s is short", backup.ErrDamaged, e.Name)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// place maps an entry name to its staged path, refusing any name that is
// not one of the directory's files.
func (st *staged) place(name string, seen map[string]bool) (string, os.FileMode, error) {
	bad := fmt.Errorf("%w: unexpected entry %q", backup.ErrDamaged, name)
	if len(name) > 4096 || strings.ContainsRune(name, 0) || path.Clean(name) != name || path.IsAbs(name) || strings.HasPrefix(name, "../") {
		return "", 0, bad
	}
	switch {
	case name == backup.StoreEntry:
		return filepath.Join(st.dir, backup.StoreEntry), 0o600, nil
	case name == backup.CAEntry:
		return "", 0, nil
	case strings.HasPrefix(name, backup.ReleaseKeysEntry):
		k := strings.TrimPrefix(name, backup.ReleaseKeysEntry)
		if k == "" || strings.Contains(k, "/") || strings.HasPrefix(k, ".") {
			return "", 0, bad
		}
		st.keys = append(st.keys, k)
		return filepath.Join(st.dir, "release-keys", k), 0o644, nil
	case strings.HasPrefix(name, backup.ReleasesEntry):
		rest := strings.TrimPrefix(name, backup.ReleasesEntry)
		rel, file, ok := strings.Cut(rest, "/")
		if !ok || semver.Valid(rel) != nil {
			return "", 0, bad
		}
		for _, part := range strings.Split(file, "/") {
			if part == "" || part == "." || part == ".." {
				return "", 0, bad
			}
		}
		if !seen[rel] {
			seen[rel] = true
			st.releases = append(st.releases, rel)
		}
		st.releaseFiles++
		return filepath.Join(st.dir, "releases", filepath.FromSlash(rest)), 0o444, nil
	}
	return "", 0, bad
}

// install moves the staged release keys and trees into d; a tree already
// there (of a store that is gone) is replaced.
func (st *staged) install(d DataDir) error {
	for _, sub := range []string{d.Releases(), d.ReleaseKeys()} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
	}
	for _, k := range st.keys {
		if err := os.Rename(filepath.Join(st.dir, "release-keys", k), filepath.Join(d.ReleaseKeys(), k)); err != nil {
			return err
		}
	}
	for _, r := range st.releases {
		final := filepath.Join(d.Releases(), r)
		if _, err := os.Stat(final); err == nil {
			removeReadOnlyTree(final)
		}
		if err := os.Rename(filepath.Join(st.dir, "releases", r), final); err != nil {
			return err
		}
	}
	syncDir(d.Releases())
	syncDir(d.ReleaseKeys())
	return nil
}

// removeReadOnlyTree removes a tree whose directories may be read-only.
func removeReadOnlyTree(dir string) {
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
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
