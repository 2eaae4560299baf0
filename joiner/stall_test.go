package joiner

import (
	"testing"

	"stratum/wire"
)

// A join in installing names the members it waits for (SPEC 17).
func TestStallNamesTheMembers(t *testing.T) {
	for _, c := range []struct {
		lagging []wire.MemberLag
		want    string
	}{
		{nil, "state: installing: waiting for every member to apply the new membership"},
		{[]wire.MemberLag{{NodeID: "n-abc12def", AppliedGeneration: 3}}, "state: installing: waiting for n-abc12def to apply generation 4 (it has 3)"},
		{[]wire.MemberLag{{NodeID: "n-a", AppliedGeneration: 3}, {NodeID: "n-b", AppliedGeneration: 2}}, "state: installing: waiting for n-a (it has 3), n-b (it has 2) to apply generation 4"},
		{[]wire.MemberLag{{NodeID: "n-a", AppliedGeneration: 3}, {NodeID: "n-b", AppliedGeneration: 3}, {NodeID: "n-c", AppliedGeneration: 3}, {NodeID: "n-d", AppliedGeneration: 1}, {NodeID: "n-e", AppliedGeneration: 1}}, "state: installing: waiting for n-a (it has 3), n-b (it has 3), n-c (it has 3) and 2 more to apply generation 4"},
	} {
		if got := describe(&view{JoinerView: wire.JoinerView{Registration: wire.Registration{State: wire.StateInstalling}, Generation: 4, WaitingFor: c.lagging}}); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}
