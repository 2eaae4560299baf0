package cluster

import (
	"stratum/apierr"
	"stratum/store"
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

// StoreAdmissionRelease records the admission release. Whether a change
// is allowed (never lowered without the operator's word) is the caller's
// rule; this only writes.
func StoreAdmissionRelease(tx *store.Tx, release string) error {
	return bucketCluster.Put(tx, keyAdmissionRelease, []byte(release))
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
	return true, StoreAdmissionRelease(tx, id.ClusterRelease)
}
