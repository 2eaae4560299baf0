package iam

import (
	"encoding/json"
	"testing"

	"stratum/apierr"
	"stratum/wire"
)

func TestWithinPolicy(t *testing.T) {
	st := func(effect string, actions, resources []string) wire.Statement {
		return wire.Statement{Effect: effect, Action: actions, Resource: resources}
	}
	all := []string{"*"}
	pol := func(s ...wire.Statement) Policy { return Policy{Version: PolicyVersion, Statement: s} }
	denyApprove := st("deny", []string{"join:ApproveNodeJoin"}, []string{"join-registration/*"})
	cases := []struct {
		name          string
		child, parent Policy
		exceeds       []apierr.Issue // nil: within
	}{
		{"equal", pol(st("allow", []string{"iam:CreateToken"}, all)), pol(st("allow", []string{"iam:CreateToken"}, all)), nil},
		{"star under create-only", pol(st("allow", all, all)), pol(st("allow", []string{"iam:CreateToken"}, all)),
			[]apierr.Issue{{Code: FindingExceedsCaller, Statement: 0, Action: "*"}}},
		{"join:* within join:*", pol(st("allow", []string{"join:*"}, all)), pol(st("allow", []string{"join:*"}, all)), nil},
		{"join:* within *", pol(st("allow", []string{"join:*"}, all)), pol(st("allow", all, all)), nil},
		{"join:* not within join:Get*", pol(st("allow", []string{"join:*"}, all)), pol(st("allow", []string{"join:Get*"}, all)),
			[]apierr.Issue{{Code: FindingExceedsCaller, Statement: 0, Action: "join:*"}}},
		{"join:Get* not within an exact action", pol(st("allow", []string{"join:Get*"}, all)), pol(st("allow", []string{"join:GetRegistration"}, all)),
			[]apierr.Issue{{Code: FindingExceedsCaller, Statement: 0, Action: "join:Get*"}}},
		{"narrower resource", pol(st("allow", []string{"join:GetRegistration"}, []string{"join-registration/j-1"})), pol(st("allow", []string{"join:*"}, []string{"join-registration/*"})), nil},
		{"wider resource", pol(st("allow", []string{"join:GetRegistration"}, all)), pol(st("allow", []string{"join:*"}, []string{"join-registration/*"})),
			[]apierr.Issue{{Code: FindingExceedsCaller, Statement: 0, Action: "join:GetRegistration"}}},
		{"action and resource from different parent statements", pol(st("allow", []string{"join:GetRegistration"}, all)),
			pol(st("allow", []string{"join:GetRegistration"}, []string{"join-registration/*"}), st("allow", []string{"audit:ReadAudit"}, all)),
			[]apierr.Issue{{Code: FindingExceedsCaller, Statement: 0, Action: "join:GetRegistration"}}},
		{"hits a parent deny", pol(st("allow", []string{"join:*"}, all)), pol(st("allow", all, all), denyApprove),
			[]apierr.Issue{{Code: FindingExceedsCaller, Statement: 0, Action: "join:*"}}},
		{"keeps the parent deny", pol(st("allow", []string{"join:*"}, all), denyApprove), pol(st("allow", all, all), denyApprove), nil},
		{"keeps a wider deny", pol(st("allow", []string{"join:*"}, all), st("deny", []string{"join:Approve*"}, all)), pol(st("allow", all, all), denyApprove), nil},
		{"a narrower deny is not enough", pol(st("allow", []string{"join:*"}, all), st("deny", []string{"join:ApproveNodeJoin"}, []string{"join-registration/j-1"})), pol(st("allow", all, all), denyApprove),
			[]apierr.Issue{{Code: FindingExceedsCaller, Statement: 0, Action: "join:*"}}},
		{"misses the deny's resource", pol(st("allow", []string{"join:ApproveNodeJoin"}, []string{"join-token/*"})), pol(st("allow", all, all), denyApprove), nil},
		{"a child deny is never an excess", pol(st("allow", []string{"iam:CreateToken"}, all), st("deny", all, all)), pol(st("allow", []string{"iam:CreateToken"}, all)), nil},
		{"allow fully denied by the child itself", pol(st("allow", all, all), st("deny", all, all)), pol(st("allow", []string{"iam:CreateToken"}, all)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := WithinPolicy(tc.child, tc.parent)
			if tc.exceeds == nil {
				if err != nil {
					t.Fatalf("WithinPolicy = %v, want nil", err)
				}
				return
			}
			e, ok := apierr.As(err)
			if !ok || e.Code != apierr.Forbidden {
				t.Fatalf("WithinPolicy = %v, want FORBIDDEN", err)
			}
			got, _ := json.Marshal(e.Issues)
			want, _ := json.Marshal(tc.exceeds)
			if string(got) != string(want) {
				t.Errorf("issues = %s, want %s", got, want)
			}
		})
	}
}
