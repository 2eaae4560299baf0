package founder

import (
	"log/slog"
	"net"

	"stratum/cluster"
	"stratum/join"
	"stratum/store"
)

// migrateTrust brings a data directory made by an earlier build up to
// the trust rules (SPEC 10.2, 10.3), in one transaction at each start
// (it changes nothing once done): the admission release is stored from
// the configured clusterRelease, and members whose join is installing or
// joined are marked installed so their reports keep counting.
func migrateTrust(db *store.DB, log *slog.Logger) error {
	return db.Update(func(tx *store.Tx) error {
		seeded, err := cluster.SeedAdmissionRelease(tx)
		if err != nil {
			return err
		}
		if seeded {
			rel, err := cluster.AdmissionRelease(tx)
			if err != nil {
				return err
			}
			log.Info("migrated: the admission release starts at the configured clusterRelease", "release", rel)
			if err := tx.Audit("cluster.release.migrated", "stratum", "admission-release", map[string]string{"to": rel}); err != nil {
				return err
			}
		}
		n, err := join.MigrateMembers(tx)
		if err != nil {
			return err
		}
		if n > 0 {
			log.Info("migrated: members admitted by an earlier build are accepted by their certificate's name until their next delivery", "members", n)
		}
		return nil
	})
}

// hostAddrs are the founder host's own unicast addresses; no joiner may
// be given a certificate for them.
func hostAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}
