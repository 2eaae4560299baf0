package cluster

import "stratum/store"

const keyAdmissionRelease = "admission-release"

// AdmissionRelease is the release joiners are admitted on (SPEC 10.2):
// the stored one, else the configured clusterRelease (a data directory
// made before the admission release existed).
func AdmissionRelease(tx *store.Tx) (string, error) {
	if raw := bucketCluster.Get(tx, keyAdmissionRelease); len(raw) > 0 {
		return string(raw), nil
	}
	id, err := LoadIdentity(tx)
	if err != nil {
		return "", err
	}
	return id.ClusterRelease, nil
}

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
