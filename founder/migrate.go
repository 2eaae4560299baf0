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
// the configured clusterRelease; members whose join is installing or
// joined are marked installed so their reports keep counting, and
// members without a recorded leaf serial get the one their delivery was
// audited with.
func migrateTrust(db *store.DB, log *slog.Logger) error {
	var need bool
	if err := db.View(func(tx *store.Tx) error { need = join.MembersNeedMigration(tx); return nil }); err != nil {
		return err
	}
	var serials map[string]string
	if need {
		var err error
		if serials, err = join.AuditedLeafSerials(db); err != nil {
			return err
		}
	}
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
		n, legacy, err := join.MigrateMembers(tx, serials)
		if err != nil {
			return err
		}
		if n > 0 {
			log.Info("migrated: members admitted by an earlier build now carry the serial of their delivered leaf", "members", n)
		}
		if legacy > 0 {
			log.Warn("members admitted by an earlier build without an audited leaf serial stay accepted by their certificate's name", "members", legacy)
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
