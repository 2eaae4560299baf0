package cluster

import (
	"stratum/store"
	"stratum/wire"
)

// migrateMemberTrust is the cluster's second step of migration 6 (SPEC
// 10.3): it brings members admitted by an earlier build up to the trust
// rules, from the audit chain (which every build has written) and the
// members themselves; it writes only members:
//   - a member without a recorded leaf serial gets the one its delivery
//     was audited with (join.delivering's certSerial), so only that leaf
//     is accepted for it from now on;
//   - a member whose join was audited installing, done or joined is
//     marked installed, so its reports keep counting (a join that failed
//     after installing removed its member).
//
// A member whose serial is not in the audit log stays accepted by its
// certificate's name, as the earlier build did (CheckNodeLeaf). A store
// that holds no cluster yet has nothing to migrate.
func migrateMemberTrust(tx *store.Tx) error {
	if !Initialized(tx) {
		return nil
	}
	serials, installed := map[string]string{}, map[string]bool{}
	err := store.AuditBucket.ForEach(tx, func(_ string, e wire.AuditEvent) error {
		switch e.Kind {
		case "join.delivering":
			if e.Data["certSerial"] != "" {
				serials[e.Subject] = e.Data["certSerial"]
			}
		case "join.installing", "join.done", "join.joined":
			installed[e.Subject] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	members, err := Members(tx)
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
		if !m.Installed && installed[m.JoinID] {
			m.Installed, changed = true, true
		}
		if changed {
			if err := PutMember(tx, m); err != nil {
				return err
			}
		}
	}
	return nil
}
