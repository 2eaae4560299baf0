package cluster

import (
	"errors"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/store"
	"stratum/wire"
)

// TestCheckNodeLeaf: only the serial delivered to a member whose join is
// installing or joined counts; members of an earlier build (no serial)
// are accepted by name once vouched for.
func TestCheckNodeLeaf(t *testing.T) {
	db := openStore(t)
	cfg, err := ParseConfig([]byte(fullConfig))
	if err != nil {
		t.Fatal(err)
	}
	members := []Member{
		{MemberView: wire.MemberView{NodeID: "n-install1"}, JoinID: "j-1", LeafSerial: "abc1", Installed: true},
		{MemberView: wire.MemberView{NodeID: "n-deliver1"}, JoinID: "j-2", LeafSerial: "abc2"},
		{MemberView: wire.MemberView{NodeID: "n-legacy01"}, JoinID: "j-3", Installed: true},
		{MemberView: wire.MemberView{NodeID: "n-legacy02"}, JoinID: "j-4"},
	}
	err = db.Update(func(tx *store.Tx) error {
		if _, _, _, err := Init(tx, cfg, true, time.Now()); err != nil {
			return err
		}
		for _, m := range members {
			if err := PutMember(tx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		node, serial string
		want         apierr.Code // "" accepted
	}{
		{"n-install1", "abc1", ""},
		{"n-install1", "abc9", apierr.Unauthenticated}, // another leaf with the member's name
		{"n-deliver1", "abc2", apierr.Forbidden},       // still delivering
		{"n-gone0001", "abc3", apierr.Unauthenticated}, // cancelled or failed: no member
		{"n-legacy01", "anything", ""},
		{"n-legacy02", "anything", apierr.Forbidden},
	}
	// The HTTP layer's checks, reading through Decoded (twice: the second
	// read is of records decoded before), decide as CheckNodeLeaf does.
	leaves := NodeLeaves{DB: db, Decoded: &Decoded{}}
	check := func(node, serial string, want apierr.Code) {
		t.Helper()
		errs := []error{db.View(func(tx *store.Tx) error {
			_, err := CheckNodeLeaf(tx, node, serial)
			return err
		})}
		for range 2 {
			errs = append(errs, leaves.CheckNodeLeaf(node, serial))
		}
		for i, err := range errs {
			var ae *apierr.Error
			switch {
			case want == "" && err != nil:
				t.Errorf("%s/%s (%d): refused: %v", node, serial, i, err)
			case want != "" && (!errors.As(err, &ae) || ae.Code != want):
				t.Errorf("%s/%s (%d): %v, want %s", node, serial, i, err, want)
			}
		}
	}
	for _, tc := range cases {
		check(tc.node, tc.serial, tc.want)
	}
	// A member record rewritten without the data key over one decoded
	// before counts for nothing.
	if err := db.Update(func(tx *store.Tx) error {
		return store.Named("members").Put(tx, "n-install1", []byte(`{"nodeId":"n-install1","joinId":"j-1","leafSerial":"abc9","installed":true}`))
	}); err != nil {
		t.Fatal(err)
	}
	check("n-install1", "abc9", apierr.Unauthenticated)
	check("n-install1", "abc1", apierr.Unauthenticated)
}
