package cluster

import (
	"errors"
	"stratum/apierr"
	"stratum/semver"
	"stratum/store"
	"stratum/wire"
)

const keyAdmissionRelease = "admission-release"

// AdmissionRelease is the release joiners are admitted on (SPEC 10.2):
// the stored one, else the configured clusterRelease (a data directory
// made before the admission release existed).
func AdmissionRelease(tx *store.Tx) (string, error) {
	raw := bucketCluster.Get(tx, keyAdmissionRelease)
	if len(raw) > 0 {
		return string(raw), nil
	}
	if raw == nil && bucketCluster.Occupied(tx, keyAdmissionRelease) {
		// A stored value failing its MAC is not "none stored": falling
		// back to the configured clusterRelease would re-admit joiners on
		// the cluster's first release (SPEC 16.2).
		return "", ErrAdmissionReleaseRejected
	}
	id, err := LoadIdentity(tx)
	if err != nil {
		return "", err
	}
	return id.ClusterRelease, nil
}

// ErrAdmissionReleaseRejected: the stored admission release fails its MAC.
// Nobody is admitted until the operator sets it again.
var ErrAdmissionReleaseRejected = apierr.New(apierr.Conflict, "the stored admission release fails its MAC (written without the data key): no joiner is admitted until the operator sets it again (stratum cluster release set)")

// The admission release has one owner, this file: what is stored and
// read, the operator's rule (SetAdmissionRelease) and the records' rule
// (RaiseAdmissionRelease). The release set only finds the release every
// joined member reports; the join only reads it.

// storeAdmissionRelease writes the admission release.
func storeAdmissionRelease(tx *store.Tx, release string) error {
	return bucketCluster.Put(tx, keyAdmissionRelease, []byte(release))
}

// SetAdmissionRelease is the operator setting the admission release.
// Lowering it needs AllowDowngrade: it re-admits joiners on an older
// release. A stored value failing its MAC is replaced.
func SetAdmissionRelease(tx *store.Tx, actor string, req wire.SetAdmissionRequest) (wire.AdmissionView, error) {
	var f apierr.Fields
	if req.Release == "" {
		f.Add("release", "required")
	} else if semver.Valid(req.Release) != nil {
		f.Add("release", "not a semantic version (e.g. 0.6.0)")
	}
	if err := f.Err("the cluster release has problems"); err != nil {
		return wire.AdmissionView{}, err
	}
	cur, err := AdmissionRelease(tx)
	if errors.Is(err, ErrAdmissionReleaseRejected) {
		cur, err = "", nil // the operator's word replaces a record that fails its MAC
	}
	if err != nil {
		return wire.AdmissionView{}, err
	}
	out := wire.AdmissionView{AdmissionRelease: req.Release, Previous: cur}
	if semver.Compare(req.Release, cur) < 0 && !req.AllowDowngrade {
		return out, apierr.New(apierr.Conflict, "the admission release is %s: lowering it to %s admits joiners on an older release, and needs allowDowngrade (stratum cluster release set %s --allow-downgrade)", cur, req.Release, req.Release)
	}
	if req.Release == cur {
		return out, nil
	}
	if err := storeAdmissionRelease(tx, req.Release); err != nil {
		return out, err
	}
	kind := "cluster.release.set"
	if semver.Compare(req.Release, cur) < 0 {
		kind = "cluster.release.downgraded"
	}
	return out, tx.Audit(kind, actor, keyAdmissionRelease, map[string]string{"from": cur, "to": req.Release})
}

// RaiseAdmissionRelease lifts the admission release to the newest of
// held (the releases the founder holds: imported, verified, not found
// corrupt, SPEC 16.6) that is above it and at most floor (the oldest
// release every joined member reports). It never lowers it, and a floor
// the founder holds no release up to moves it nowhere.
func RaiseAdmissionRelease(tx *store.Tx, actor, floor string, held []string) error {
	cur, err := AdmissionRelease(tx)
	if err != nil || semver.Valid(floor) != nil || semver.Compare(floor, cur) <= 0 {
		return err
	}
	to := ""
	for _, r := range held {
		if semver.Valid(r) == nil && semver.Compare(r, cur) > 0 && semver.Compare(r, floor) <= 0 && (to == "" || semver.Compare(r, to) > 0) {
			to = r
		}
	}
	if to == "" {
		return nil
	}
	if err := storeAdmissionRelease(tx, to); err != nil {
		return err
	}
	return tx.Audit("cluster.release.raised", actor, keyAdmissionRelease, map[string]string{"from": cur, "to": to, "why": "every joined member reports it or newer and the founder holds it"})
}

// migrateAdmissionRelease is the cluster's step of migration 6: a data
// directory made before the admission release existed starts at its
// configured clusterRelease.
func migrateAdmissionRelease(tx *store.Tx) error {
	if !Initialized(tx) {
		return nil
	}
	seeded, err := seedAdmissionRelease(tx)
	if err != nil || !seeded {
		return err
	}
	rel, err := AdmissionRelease(tx)
	if err != nil {
		return err
	}
	return tx.Audit("cluster.release.migrated", "stratum", keyAdmissionRelease, map[string]string{"to": rel, "why": "the admission release starts at the configured clusterRelease"})
}

// seedAdmissionRelease stores the configured clusterRelease as the
// admission release when none is stored yet (a data directory made by a
// build without it); it reports whether it wrote.
func seedAdmissionRelease(tx *store.Tx) (bool, error) {
	if len(bucketCluster.Get(tx, keyAdmissionRelease)) > 0 {
		return false, nil
	}
	id, err := LoadIdentity(tx)
	if err != nil {
		return false, err
	}
	return true, storeAdmissionRelease(tx, id.ClusterRelease)
}
