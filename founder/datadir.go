// Package founder composes the founder: its data directory, the store,
// the domain services, the two TLS listeners and their shutdown.
//
// Serving and offline operations are kept apart. `stratum serve` is
// Serve (serve.go) with its wiring: the services (wiring.go), the
// background loops on one scheduler (schedule.go), the control socket
// (control.go), the prober, OpenBao, the own record, metrics, replicas
// and neighbours. The offline operations work on a data directory with
// no founder running and start none of that: init (datadir.go), the data
// key and its TPM (datakey.go), backup of a stopped founder (backup.go),
// restore (restore.go), migrate (migrate.go), the audit high-water mark
// (audithwm.go). A running founder's operations (backup, audit verify,
// openbao converge) are asked over its control socket, whose one client
// is the CLI.
package founder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"stratum/cluster"
	"stratum/crypto"
	"stratum/iam"
	"stratum/store"
)

// DataDir names the files of a founder's data directory.
type DataDir string

func (d DataDir) path(name string) string { return filepath.Join(string(d), name) }

// DB is the bbolt file.
func (d DataDir) DB() string { return d.path("stratum.db") }

// DataKey is the secret-sealing key.
func (d DataDir) DataKey() string { return d.path("data.key") }

// CACert is the public CA certificate.
func (d DataDir) CACert() string { return d.path("ca.pem") }

// Credentials is the bootstrap admin credentials file.
func (d DataDir) Credentials() string { return d.path("bootstrap-credentials.txt") }

// Releases holds imported release trees.
func (d DataDir) Releases() string { return d.path("releases") }

// ReleaseKeys holds trusted release public keys.
func (d DataDir) ReleaseKeys() string { return d.path("release-keys") }

// ControlSocket is the local socket for backups of a running founder.
func (d DataDir) ControlSocket() string { return d.path("control.sock") }

// Initialized reports whether the directory holds a store.
func (d DataDir) Initialized() bool {
	_, err := os.Stat(d.DB())
	return err == nil
}

// StoreTarget is where the founder's state lives: the --store DSN when one
// is given (SPEC section 13), else the bbolt file in the directory.
func (d DataDir) StoreTarget(dsn string) string {
	if dsn != "" {
		return dsn
	}
	return d.DB()
}

// HoldsCluster reports whether the store (the directory's file, or the
// database dsn names) holds a cluster.
func (d DataDir) HoldsCluster(dsn string) (bool, error) {
	if dsn == "" {
		return d.Initialized(), nil
	}
	db, err := store.OpenReadOnly(dsn, nil)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var held bool
	err = db.View(func(tx *store.Tx) error { held = cluster.Initialized(tx); return nil })
	return held, err
}

// InitResult is what init prints.
type InitResult struct {
	Identity        cluster.Identity
	CAPin           string
	CredentialsPath string
	// RecoveryKey is set when the data key was sealed to a TPM: it is
	// shown once and kept nowhere.
	RecoveryKey *crypto.RecoveryKey
}

// Init creates a cluster in an empty directory with a plain data.key.
func Init(d DataDir, cfg cluster.Config, dev bool, now time.Time) (InitResult, error) {
	return InitWithKey(d, cfg, dev, KeySource{}, "", now)
}

// InitWithKey creates a cluster, its data key kept as ks says (sealed to
// a TPM when ks.TPM is set) and its state in the directory's bbolt file
// or, with dsn, in an empty PostgreSQL database (docs/HA.md).
func InitWithKey(d DataDir, cfg cluster.Config, dev bool, ks KeySource, dsn string, now time.Time) (InitResult, error) {
	if held, err := d.HoldsCluster(dsn); err != nil {
		return InitResult{}, err
	} else if held && dsn != "" {
		return InitResult{}, errors.New("the database already holds a cluster; init runs once (further replicas run `stratum serve --store` with a copy of the data key)")
	} else if held {
		return InitResult{}, fmt.Errorf("%s already holds a cluster (%s exists); init runs once", d, d.DB())
	}
	if err := cfg.Validate(dev); err != nil {
		return InitResult{}, err
	}
	if err := d.refuseKeyFiles(); err != nil {
		return InitResult{}, err
	}
	dk, err := crypto.GenerateDataKey()
	if err != nil {
		return InitResult{}, err
	}
	// Seal before anything is written: a missing TPM leaves no trace.
	key, err := prepareDataKey(dk, ks)
	if err != nil {
		return InitResult{}, err
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return InitResult{}, err
	}
	for _, sub := range []string{d.Releases(), d.ReleaseKeys()} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return InitResult{}, err
		}
	}
	if err := key.write(d); err != nil {
		return InitResult{}, err
	}
	res := InitResult{RecoveryKey: key.recoveryKey}
	db, err := store.Open(d.StoreTarget(dsn), dk)
	if err != nil {
		d.removeKeyFiles()
		return InitResult{}, err
	}
	defer db.Close()
	var caPEM []byte
	err = db.Update(func(tx *store.Tx) error {
		id, _, ca, err := cluster.Init(tx, cfg, dev, now)
		if err != nil {
			return err
		}
		res.Identity, res.CAPin, caPEM = id, ca.Pin(), ca.CertPEM()
		// The appliance's own admin has a password of its own: the
		// cluster secret sec.AdminPassword is delivered to control-plane
		// nodes and must never log in here (SPEC 16.1).
		password := crypto.RandomPassword(24)
		if err := iam.CreateBootstrapAdmin(tx, id.AdminEmail, password, now); err != nil {
			return err
		}
		// The credentials reach the disk before the cluster commits: a
		// crash between the two leaves no cluster whose admin password is
		// lost (init runs again and overwrites the file).
		creds := fmt.Sprintf("email=%s\npassword=%s\n", id.AdminEmail, password)
		return crypto.WriteFileAtomic(d.Credentials(), []byte(creds), 0o600)
	})
	if err != nil {
		db.Close()
		os.Remove(d.DB())
		d.removeKeyFiles()
		os.Remove(d.Credentials())
		return InitResult{}, err
	}
	if err := crypto.WriteFileAtomic(d.CACert(), caPEM, 0o644); err != nil {
		return res, err
	}
	res.CredentialsPath = d.Credentials()
	return res, nil
}

// AuditUnreadError is what kept VerifyAudit from reading the chain at
// all: no data key, a store that is not there or cannot be opened, a
// database out of reach. It says nothing of the chain.
type AuditUnreadError struct{ Err error }

func (e *AuditUnreadError) Error() string { return e.Err.Error() }
func (e *AuditUnreadError) Unwrap() error { return e.Err }

// VerifyAudit checks the audit chain of a store no founder holds (the
// directory's file, or the database dsn names, read beside its replicas): the
// links are keyed, so it needs the data key (a file, or sealed to the TPM).
// What stops it before the chain is read is an *AuditUnreadError.
func (d DataDir) VerifyAudit(ks KeySource, dsn string) (int, error) {
	if dsn == "" && !d.Initialized() {
		return 0, &AuditUnreadError{fmt.Errorf("no founder store in %s (stratum.db is not there; a founder on PostgreSQL: give --store or STRATUM_STORE)", d)}
	}
	key, err := d.LoadDataKey(ks)
	if err != nil {
		return 0, &AuditUnreadError{err}
	}
	db, err := store.OpenReadOnly(d.StoreTarget(dsn), key)
	if err != nil {
		return 0, &AuditUnreadError{err}
	}
	defer db.Close()
	n, err := db.VerifyAudit()
	var rejected *store.RejectedRecordsError
	if err != nil && !errors.As(err, &rejected) {
		return n, err
	}
	verdict := err
	have, err := db.AuditMark()
	if err != nil {
		return n, err
	}
	var clusterID string
	if ks.TPM != "" {
		if clusterID, err = clusterIDOf(db); err != nil {
			return n, err
		}
	}
	if err := d.CheckAuditHWM(key, have, ks.TPM, clusterID); err != nil {
		return n, err
	}
	return n, verdict
}

// clusterIDOf reads the cluster's id from a store no founder holds.
func clusterIDOf(db *store.DB) (string, error) {
	var id cluster.Identity
	err := db.View(func(tx *store.Tx) error {
		var err error
		id, err = cluster.LoadIdentity(tx)
		return err
	})
	return id.ClusterID, err
}
