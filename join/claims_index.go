package join

import (
	"stratum/store"
	"stratum/wire"
)

// The claims index holds, for every queued join, its node id and each of
// its addresses. enqueue adds a join's claims and dequeue removes them, so
// the index is exactly the queue's: a join leaves the queue to take its
// turn (its node becomes a member, which claims the same things), or when
// it is rejected.

func claimKeys(a *wire.Assignment) []string {
	if a == nil {
		return nil
	}
	keys := []string{"n/" + a.NodeID}
	if ip := normalIPOrEmpty(a.MgmtIP); ip != "" {
		keys = append(keys, "a/"+ip)
	}
	for _, n := range a.Networks {
		if ip := normalIPOrEmpty(n.IP); ip != "" {
			keys = append(keys, "a/"+ip)
		}
	}
	return keys
}

func putClaims(tx *store.Tx, r *record) error {
	for _, k := range claimKeys(r.Assignment) {
		if bucketClaims.Get(tx, k) != nil {
			continue // first claim wins, as the checks read it
		}
		if err := bucketClaims.Put(tx, k, []byte(r.JoinID)); err != nil {
			return err
		}
	}
	return nil
}

func dropClaims(tx *store.Tx, r *record) error {
	for _, k := range claimKeys(r.Assignment) {
		if string(bucketClaims.Get(tx, k)) == r.JoinID {
			if err := bucketClaims.Delete(tx, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimedBy names the queued join holding key, "" when none does.
func claimedBy(tx *store.Tx, key, self string) string {
	if holder := string(bucketClaims.Get(tx, key)); holder != self {
		return holder
	}
	return ""
}

// rebuildClaims makes the index from the queue (the migration for stores
// made before it existed).
func rebuildClaims(tx *store.Tx) error {
	var stale []string
	if err := bucketClaims.ForEach(tx, func(k string, _ []byte) error { stale = append(stale, k); return nil }); err != nil {
		return err
	}
	for _, k := range stale {
		if err := bucketClaims.Delete(tx, k); err != nil {
			return err
		}
	}
	ids, err := queueIDs(tx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		r, found, err := getRecord(tx, id)
		if err != nil {
			return err
		}
		if found {
			if err := putClaims(tx, &r); err != nil {
				return err
			}
		}
	}
	return nil
}
