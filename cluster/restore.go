package cluster

import (
	"time"

	"stratum/apierr"
	"stratum/store"
)

// A founder restored from a backup is a copy of a cluster that may still
// be running: a drill, or a disaster recovery whose old founder is not
// yet known to be gone. It starts isolated (no prober, no OpenBao, no
// node or joiner answered) until an operator takes it over.
//
// The mark lives in the identity record because that is the one record
// a founder cannot start without: it is authenticated (SPEC 16.2), so a
// mark written or removed without the data key fails its MAC and the
// founder refuses to start, instead of reading "never restored" and
// reaching the live nodes. Only TakeOver, with the data key, ends it.

// RestoreMark says when and from what a store was restored, and when it
// was taken over (nil until then).
type RestoreMark struct {
	RestoredAt time.Time `json:"restoredAt"`
	// Backup is the backup file's name (its base name, no directory).
	Backup      string     `json:"backup"`
	TakenOverAt *time.Time `json:"takenOverAt,omitempty"`
	TakenOverBy string     `json:"takenOverBy,omitempty"`
}

// Isolated reports whether the store was restored and not taken over.
func (id Identity) Isolated() bool {
	return id.Restored != nil && id.Restored.TakenOverAt == nil
}

// MarkRestored marks the store restored from backup, isolated until
// TakeOver; a mark from an earlier restore (of a backup of a restored
// founder) is replaced. Audited.
func MarkRestored(tx *store.Tx, backup string, now time.Time) error {
	id, err := LoadIdentity(tx)
	if err != nil {
		return err
	}
	id.Restored = &RestoreMark{RestoredAt: now.UTC(), Backup: backup}
	if err := identity.Put(tx, id); err != nil {
		return err
	}
	return tx.Audit("cluster.restored", "restore", id.ClusterID, map[string]string{"backup": backup})
}

// ErrNotIsolated refuses a take-over of a founder that is not isolated.
var ErrNotIsolated = apierr.New(apierr.Conflict, "this founder is not isolated (never restored, or already taken over): there is nothing to take over")

// TakeOver ends the isolation of a restored store for good: from now on
// its founder probes the nodes, acts on OpenBao and answers nodes and
// joiners. Audited with actor.
func TakeOver(tx *store.Tx, actor string, now time.Time) (RestoreMark, error) {
	id, err := LoadIdentity(tx)
	if err != nil {
		return RestoreMark{}, err
	}
	if !id.Isolated() {
		return RestoreMark{}, ErrNotIsolated
	}
	at := now.UTC()
	id.Restored.TakenOverAt, id.Restored.TakenOverBy = &at, actor
	if err := identity.Put(tx, id); err != nil {
		return RestoreMark{}, err
	}
	m := *id.Restored
	return m, tx.Audit("cluster.taken-over", actor, id.ClusterID, map[string]string{
		"backup": m.Backup, "restoredAt": m.RestoredAt.Format(time.RFC3339)})
}
