package httpapi_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"stratum/iam"
)

// GET /v1/auth/self tells a console what to offer; it needs a token and
// answers only what the caller's own policy allows.
func TestSelf(t *testing.T) {
	f := newFixture(t, bigLimiter)
	admin := f.login()
	limited := f.createToken(admin, "describe-only", describeOnly)
	cases := []struct {
		name, token string
		status      int
		actions     int // -1: not checked
	}{
		{"no token", "", 401, -1},
		{"admin", admin, 200, len(iam.Actions)},
		{"describe only", limited.Token, 200, 1},
	}
	for _, c := range cases {
		r := f.json("GET", "/v1/auth/self", c.token, nil)
		if r.status != c.status {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		if c.actions < 0 {
			continue
		}
		var out struct {
			Subject string   `json:"subject"`
			User    string   `json:"user"`
			Actions []string `json:"actions"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil || out.Subject == "" || out.User == "" || len(out.Actions) != c.actions {
			t.Errorf("%s: %s (%v), want %d actions", c.name, r.body, err, c.actions)
		}
		if c.name == "describe only" && !reflect.DeepEqual(out.Actions, []string{"upgrade:DescribeRelease"}) {
			t.Errorf("describe-only token may %v", out.Actions)
		}
	}
}

// GET /v1/admin/audit/verify reports the chain's status to a caller with
// audit:ReadAudit and to no one else.
func TestAuditVerify(t *testing.T) {
	f := newFixture(t, bigLimiter)
	admin := f.login()
	limited := f.createToken(admin, "describe-only", describeOnly)
	if r := f.json("GET", "/v1/admin/audit/verify", limited.Token, nil); r.status != 403 {
		t.Errorf("limited token: %d %s", r.status, r.body)
	}
	r := f.json("GET", "/v1/admin/audit/verify", admin, nil)
	var out struct {
		Intact  bool   `json:"intact"`
		Events  int    `json:"events"`
		Problem string `json:"problem"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 || !out.Intact || out.Events < 4 || out.Problem != "" {
		t.Fatalf("verify = %d %s (%v)", r.status, r.body, err)
	}
}
