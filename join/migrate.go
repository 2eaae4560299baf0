package join

import (
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// migrateTrust is the join's step of migration 6 (SPEC 10.3; the
// cluster's step seeds the admission release): it runs once, in one
// transaction, when a store of an earlier schema is opened. A store that
// holds no cluster yet has nothing to migrate: every delivery records its
// serial.
func migrateTrust(tx *store.Tx) error {
	if !cluster.Initialized(tx) {
		return nil
	}
	serials, err := auditedLeafSerials(tx)
	if err != nil {
		return err
	}
	return migrateMembers(tx, serials)
}

// migrateMembers brings members admitted by an earlier build up to the
// trust rules:
//   - a member whose join is installing or joined is marked installed,
//     so its reports keep counting;
//   - a member without a recorded leaf serial gets the one its delivery
//     was audited with (serials: join id -> serial), so only that leaf
//     is accepted for it from now on.
//
// A member whose serial is not in the audit log stays accepted by its
// certificate's name, as the earlier build did (cluster.CheckNodeLeaf).
func migrateMembers(tx *store.Tx, serials map[string]string) error {
	members, err := cluster.Members(tx)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.JoinID == "" {
			continue
		}
		changed := false
		if s := serials[m.JoinID]; m.LeafSerial == "" && s != "" {
			m.LeafSerial, changed = s, true
		}
		if !m.Installed {
			r, found, err := getRecord(tx, m.JoinID)
			if err != nil {
				return err
			}
			if found && (r.State == wire.StateInstalling || r.State == wire.StateJoined) {
				m.Installed, changed = true, true
			}
		}
		if changed {
			if err := cluster.PutMember(tx, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// auditedLeafSerials reads the serial each delivery was audited with
// (join.delivering events, which every build has written), by join id.
func auditedLeafSerials(tx *store.Tx) (map[string]string, error) {
	out := map[string]string{}
	err := store.AuditBucket.ForEach(tx, func(_ string, e store.AuditEvent) error {
		if e.Kind == "join.delivering" && e.Data["certSerial"] != "" {
			out[e.Subject] = e.Data["certSerial"]
		}
		return nil
	})
	return out, err
}
