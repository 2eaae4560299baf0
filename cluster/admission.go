package cluster

import "stratum/store"

const keyAdmissionRelease = "admission-release"

// AdmissionRelease is the release joiners are admitted on (SPEC 10.2):
// the stored one, else the configured clusterRelease (a data directory
// made before the admission release existed).
func AdmissionRelease(tx *store.Tx) (string, error) {
	if raw := tx.GetRaw(bucketCluster, keyAdmissionRelease); len(raw) > 0 {
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
	return tx.PutRaw(bucketCluster, keyAdmissionRelease, []byte(release))
}

// SeedAdmissionRelease stores the configured clusterRelease as the
// admission release when none is stored yet (a data directory made by a
// build without it); it reports whether it wrote.
func SeedAdmissionRelease(tx *store.Tx) (bool, error) {
	if len(tx.GetRaw(bucketCluster, keyAdmissionRelease)) > 0 {
		return false, nil
	}
	id, err := LoadIdentity(tx)
	if err != nil {
		return false, err
	}
	return true, StoreAdmissionRelease(tx, id.ClusterRelease)
}
