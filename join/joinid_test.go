package join

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"stratum/store"
	"stratum/store/storetest"
)

// TestJoinIDsFollowJoinOrder: a join id is "j-" and eight of [a-z0-9]
// whose first five are its registration's sequence number in base 36, so
// ids sort in join order (and a rack's registrations share pages); the
// registration's one audit event names the token it spent and the uses
// left.
func TestJoinIDsFollowJoinOrder(t *testing.T) {
	e := newEnv(t)
	tok := e.token("worker", 40)
	var ids []string
	for i := range 40 {
		v, created, err := e.register("order-"+strconv.Itoa(i), tok, clusterRelease, false)
		if err != nil || !created {
			t.Fatalf("register %d: %v", i, err)
		}
		if !regexp.MustCompile(`^j-[0-9a-z]{8}$`).MatchString(v.JoinID) {
			t.Fatalf("join id %q is not j- and eight of [a-z0-9]", v.JoinID)
		}
		seq, err := strconv.ParseUint(v.JoinID[2:2+joinIDSeqDigits], 36, 64)
		if err != nil || seq != uint64(i+1) {
			t.Errorf("join id %q leads with %d (%v), want registration %d", v.JoinID, seq, err, i+1)
		}
		ids = append(ids, v.JoinID)
	}
	if !slices.IsSorted(ids) {
		t.Errorf("join ids out of join order: %v", ids)
	}
	events := storetest.AuditEventsOf(t, e.db, "join.registered")
	if len(events) != len(ids) {
		t.Fatalf("%d join.registered events for %d registrations", len(events), len(ids))
	}
	for i, ev := range events {
		if ev.Subject != ids[i] || ev.Data["tokenId"] == "" || ev.Data["usesLeft"] != strconv.Itoa(39-i) {
			t.Errorf("event %d: subject %s, data %v; want %s, the token and %d uses left", i, ev.Subject, ev.Data, ids[i], 39-i)
		}
	}
}

// TestJoinIDPastItsDigits: the last sequence five base-36 digits hold
// still leads its id; past it the id is random, in the same form.
func TestJoinIDPastItsDigits(t *testing.T) {
	db, _ := storetest.Temp(t)
	if err := db.Update(func(tx *store.Tx) error {
		for _, c := range []struct {
			seq  uint64
			lead string
		}{{60466175, "j-zzzzz"}, {60466176, "j-"}, {1 << 40, "j-"}} {
			id, err := newJoinID(tx, c.seq)
			if err != nil {
				return err
			}
			if !regexp.MustCompile(`^j-[0-9a-z]{8}$`).MatchString(id) || !strings.HasPrefix(id, c.lead) {
				t.Errorf("sequence %d: id %q, want j- and eight of [a-z0-9], leading %s", c.seq, id, c.lead)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
