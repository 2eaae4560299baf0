package iam

import (
	"reflect"
	"testing"
)

func TestAllowedActions(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"reader without approval",
			`{"version":"2026-01-01","statement":[{"effect":"allow","action":["join:List*","join:Get*"],"resource":["*"]}]}`,
			[]string{"join:GetRegistration", "join:ListJoinTokens", "join:ListRegistrations"}},
		{"deny on the collection wins",
			`{"version":"2026-01-01","statement":[{"effect":"allow","action":["join:*"],"resource":["*"]},{"effect":"deny","action":["join:ApproveNodeJoin"],"resource":["join-registration/*"]}]}`,
			[]string{"join:CancelNodeJoin", "join:CreateJoinToken", "join:GetRegistration", "join:ListJoinTokens", "join:ListRegistrations", "join:RejectNodeJoin", "join:RevokeJoinToken"}},
		{"an allow on one id is not the collection",
			`{"version":"2026-01-01","statement":[{"effect":"allow","action":["join:ApproveNodeJoin"],"resource":["join-registration/j-1"]}]}`,
			[]string{}},
	}
	for _, c := range cases {
		p, err := ParsePolicy([]byte(c.doc))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := (Principal{Policy: p}).AllowedActions(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := (Principal{Policy: AdminPolicy()}).AllowedActions(); len(got) != len(Actions) {
		t.Errorf("the admin policy allows %d of %d actions", len(got), len(Actions))
	}
}
