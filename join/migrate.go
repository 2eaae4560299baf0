package join

import (
	"stratum/cluster"
	"stratum/store"
)

// keyMembersMigrated marks a store whose members were brought up to the
// trust rules, so the migration (and its audit scan) runs once.
const keyMembersMigrated = "members-trust-migrated"

// MembersNeedMigration reports whether MigrateMembers has yet to run.
func MembersNeedMigration(tx *store.Tx) bool {
	return tx.GetRaw(bucketMeta, keyMembersMigrated) == nil
}

// MigrateMembers brings members admitted by an earlier build up to the
// trust rules (SPEC 10.3), once, in the caller's transaction:
//   - a member whose join is installing or joined is marked installed,
//     so its reports keep counting;
//   - a member without a recorded leaf serial gets the one its delivery
//     was audited with (serials: join id -> serial, from the audit log's
//     join.delivering events), so only that leaf is accepted for it.
//
// A member whose serial is not found stays accepted by its certificate's
// name, as the earlier build did; it is counted in legacy.
func MigrateMembers(tx *store.Tx, serials map[string]string) (migrated, legacy int, err error) {
	if !MembersNeedMigration(tx) {
		return 0, 0, nil
	}
	members, err := cluster.Members(tx)
	if err != nil {
		return 0, 0, err
	}
	for _, m := range members {
		if m.JoinID == "" {
			continue
		}
		changed := false
		if m.LeafSerial == "" {
			if s := serials[m.JoinID]; s != "" {
				m.LeafSerial, changed = s, true
			} else {
				legacy++
			}
		}
		if !m.Installed {
			r, found, err := getRecord(tx, m.JoinID)
			if err != nil {
				return migrated, legacy, err
			}
			if found && (r.State == StateInstalling || r.State == StateJoined) {
				m.Installed, changed = true, true
			}
		}
		if !changed {
			continue
		}
		if err := cluster.PutMember(tx, m); err != nil {
			return migrated, legacy, err
		}
		migrated++
	}
	return migrated, legacy, tx.PutRaw(bucketMeta, keyMembersMigrated, []byte("1"))
}

// AuditedLeafSerials reads the serial each delivery was audited with
// (join.delivering events), by join id, for MigrateMembers.
func AuditedLeafSerials(db *store.DB) (map[string]string, error) {
	const page = 1000
	out := map[string]string{}
	var after uint64
	for {
		events, err := db.AuditEvents(after, page)
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			if e.Kind == "join.delivering" && e.Data["certSerial"] != "" {
				out[e.Subject] = e.Data["certSerial"]
			}
			after = e.Seq
		}
		if len(events) < page {
			return out, nil
		}
	}
}
