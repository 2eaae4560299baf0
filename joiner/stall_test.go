package joiner

import "testing"

// A join in installing names the members it waits for (SPEC 17).
func TestStallNamesTheMembers(t *testing.T) {
	for _, c := range []struct {
		lagging []memberLag
		want    string
	}{
		{nil, "state: installing: waiting for every member to apply the new membership"},
		{[]memberLag{{"n-abc12def", 3}}, "state: installing: waiting for n-abc12def to apply generation 4 (it has 3)"},
		{[]memberLag{{"n-a", 3}, {"n-b", 2}}, "state: installing: waiting for n-a (it has 3), n-b (it has 2) to apply generation 4"},
		{[]memberLag{{"n-a", 3}, {"n-b", 3}, {"n-c", 3}, {"n-d", 1}, {"n-e", 1}}, "state: installing: waiting for n-a (it has 3), n-b (it has 3), n-c (it has 3) and 2 more to apply generation 4"},
	} {
		if got := describe(&view{State: stateInstalling, Generation: 4, WaitingFor: c.lagging}); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}
