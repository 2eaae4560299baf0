package join

import (
	"stratum/cluster"
	"stratum/store"
)

// MigrateMembers brings members admitted by an earlier build up to the
// trust rules (SPEC 10.3), once at start, in the caller's transaction:
// a member whose join is installing or joined is marked installed, so its
// reports keep counting. Such members carry no recorded leaf serial (the
// build that admitted them did not keep it); they stay accepted by their
// certificate's CommonName, as before. Every later delivery records its
// serial. Running it again changes nothing.
func MigrateMembers(tx *store.Tx) (migrated int, err error) {
	members, err := cluster.Members(tx)
	if err != nil {
		return 0, err
	}
	for _, m := range members {
		if m.JoinID == "" || m.Installed {
			continue
		}
		r, found, err := getRecord(tx, m.JoinID)
		if err != nil {
			return migrated, err
		}
		if !found || (r.State != StateInstalling && r.State != StateJoined) {
			continue
		}
		m.Installed = true
		if err := cluster.PutMember(tx, m); err != nil {
			return migrated, err
		}
		migrated++
	}
	return migrated, nil
}
