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
	for _, tc := range cases {
		err := db.View(func(tx *store.Tx) error {
			_, err := CheckNodeLeaf(tx, tc.node, tc.serial)
			return err
		})
		var ae *apierr.Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s/%s: refused: %v", tc.node, tc.serial, err)
		case tc.want != "" && (!errors.As(err, &ae) || ae.Code != tc.want):
			t.Errorf("%s/%s: %v, want %s", tc.node, tc.serial, err, tc.want)
		}
	}
}
