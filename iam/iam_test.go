package iam

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

func issuesOf(t *testing.T, err error) []apierr.Issue {
	t.Helper()
	if err == nil {
		return nil
	}
	e, ok := apierr.As(err)
	if !ok || e.Code != apierr.InvalidPolicy {
		t.Fatalf("error %v is not INVALID_POLICY", err)
	}
	return e.Issues
}

func TestParsePolicyFindings(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []apierr.Issue
	}{
		{
			name: "valid",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:Describe*"],"resource":["*"]}]}`,
		},
		{
			name: "valid: every action on its resource, deny too",
			doc: `{"version":"2026-01-01","statement":[
				{"effect":"allow","action":["join:*"],"resource":["join-token/*","join-registration/*"]},
				{"effect":"deny","action":["join:ApproveNodeJoin"],"resource":["join-registration/j-1"]},
				{"effect":"allow","action":["*"],"resource":["*"]}]}`,
		},
		{
			name: "three faults in two statements",
			doc: `{"version":"2026-01-01","statement":[
				{"effect":"allow","action":["join:Approve"],"resource":["*"]},
				{"effect":"maybe","action":["upgrade:DescribeRelease"],"resource":["join-token/*"]}]}`,
			want: []apierr.Issue{
				{Code: FindingUnknownAction, Statement: 0, Action: "join:Approve"},
				{Code: FindingInvalidDocument, Statement: 1},
				{Code: FindingActionNotApplicable, Statement: 1, Action: "upgrade:DescribeRelease"},
			},
		},
		{
			name: "wrong version",
			doc:  `{"version":"2012-10-17","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}`,
			want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}},
		},
		{
			name: "unknown field",
			doc:  `{"version":"2026-01-01","comment":"x","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}`,
			want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}},
		},
		{
			name: "unknown field in a statement",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"],"condition":{}}]}`,
			want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: 0}},
		},
		{name: "not JSON", doc: `{"version":`, want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}}},
		{name: "wrong type", doc: `{"version":"2026-01-01","statement":{"effect":"allow"}}`, want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}}},
		{name: "trailing data", doc: `{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]} {}`, want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}}},
		{
			name: "no statements",
			doc:  `{"version":"2026-01-01","statement":[]}`,
			want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: -1}},
		},
		{
			name: "empty action and resource lists",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":[],"resource":[]}]}`,
			want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: 0}},
		},
		{
			name: "unknown resource type",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"deny","action":["iam:ListTokens"],"resource":["bucket/x"]}]}`,
			want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: 0}},
		},
		{
			name: "wildcard action matching nothing",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["release:*"],"resource":["*"]}]}`,
			want: []apierr.Issue{{Code: FindingUnknownAction, Statement: 0, Action: "release:*"}},
		},
		{
			name: "wildcard action none of which applies",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["iam:*"],"resource":["audit/*"]}]}`,
			want: []apierr.Issue{{Code: FindingActionNotApplicable, Statement: 0, Action: "iam:*"}},
		},
		{
			name: "case matters",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"Allow","action":["iam:createtoken"],"resource":["*"]}]}`,
			want: []apierr.Issue{{Code: FindingInvalidDocument, Statement: 0}, {Code: FindingUnknownAction, Statement: 0, Action: "iam:createtoken"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.doc))
			got := issuesOf(t, err)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("issues = %+v, want %+v (%v)", got, tc.want, err)
			}
			if err != nil {
				if e, _ := apierr.As(err); e.Message == "" {
					t.Error("INVALID_POLICY without a message")
				}
			}
		})
	}
}

// encoding/json matches keys case-insensitively and lets a later duplicate
// win, so a reviewer reading "statement" (deny) is not reading what the
// authorizer enforces ("Statement": allow everything). A policy document
// must mean what it says: such documents are refused.
func TestParsePolicyRefusesAmbiguousKeys(t *testing.T) {
	docs := map[string]string{
		"case-variant key shadows": `{"version":"2026-01-01","statement":[{"effect":"deny","action":["*"],"resource":["*"]}],"Statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}`,
		"duplicate key":            `{"version":"2026-01-01","statement":[{"effect":"deny","action":["*"],"resource":["*"]}],"statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}`,
		"case-variant effect key":  `{"version":"2026-01-01","statement":[{"Effect":"allow","action":["*"],"resource":["*"]}]}`,
		"duplicate effect":         `{"version":"2026-01-01","statement":[{"effect":"deny","effect":"allow","action":["*"],"resource":["*"]}]}`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(doc))
			if err == nil {
				t.Fatalf("accepted; it enforces %+v", p.Statement)
			}
			if got := issuesOf(t, err); len(got) != 1 || got[0].Code != FindingInvalidDocument {
				t.Fatalf("issues = %+v, want one INVALID_DOCUMENT", got)
			}
		})
	}
}

func TestActionCatalog(t *testing.T) {
	// SPEC sections 8 and 10 list exactly these actions (and the
	// SPEC-silent upgrade:TrustReleaseKey of stratum release trust-key and
	// cluster:RemoveMember of stratum members remove, cluster:ReplaceMember
	// of stratum members replace, inventory:PutInventory and
	// inventory:GetInventory of stratum inventory apply and list).
	want := []string{"cluster:ReplaceMember", "inventory:PutInventory", "inventory:GetInventory", "iam:ListSessions", "iam:RevokeSession", "join:CreateJoinToken", "join:ListJoinTokens", "join:RevokeJoinToken", "join:ListRegistrations", "join:GetRegistration", "join:ApproveNodeJoin", "join:RejectNodeJoin", "join:CancelNodeJoin", "cluster:ListMembers", "cluster:RemoveMember", "upgrade:DescribeRelease", "upgrade:RecordRelease", "upgrade:ImportRelease", "upgrade:SetClusterRelease", "upgrade:TrustReleaseKey", "iam:CreateToken", "iam:ListTokens", "iam:RevokeToken", "audit:ReadAudit"}
	if len(Actions) != len(want) {
		t.Errorf("catalog has %d actions, spec lists %d", len(Actions), len(want))
	}
	for _, a := range want {
		if _, ok := Actions[a]; !ok {
			t.Errorf("action %s missing from the catalog", a)
		}
	}
	if Resource(ResIAMToken, "*") != "iam-token/*" {
		t.Errorf("Resource = %q", Resource(ResIAMToken, "*"))
	}
}

func TestAllows(t *testing.T) {
	type check struct {
		action, resource string
		want             bool
	}
	cases := []struct {
		name   string
		doc    string
		checks []check
	}{
		{
			name: "default deny",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`,
			checks: []check{
				{"upgrade:DescribeRelease", "release/*", true},
				{"upgrade:RecordRelease", "node/n-1", false},
				{"iam:CreateToken", "iam-token/*", false},
			},
		},
		{
			name: "star allows everything",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}`,
			checks: []check{
				{"iam:CreateToken", "iam-token/*", true},
				{"audit:ReadAudit", "audit/*", true},
			},
		},
		{
			name: "trailing wildcards",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:Describe*","join:*"],"resource":["release/*","join-token/tok-*"]}]}`,
			checks: []check{
				{"upgrade:DescribeRelease", "release/0.6.0", true},
				{"join:CreateJoinToken", "join-token/tok-abc", true},
				{"join:CreateJoinToken", "join-token/other", false},
				{"upgrade:RecordRelease", "release/0.6.0", false},
				{"join:ApproveNodeJoin", "join-registration/j-1", false},
			},
		},
		{
			name: "deny wins over allow, in either order",
			doc: `{"version":"2026-01-01","statement":[
				{"effect":"deny","action":["iam:*"],"resource":["*"]},
				{"effect":"allow","action":["*"],"resource":["*"]},
				{"effect":"deny","action":["join:ApproveNodeJoin"],"resource":["join-registration/j-bad"]}]}`,
			checks: []check{
				{"iam:CreateToken", "iam-token/*", false},
				{"iam:ListTokens", "iam-token/*", false},
				{"join:ApproveNodeJoin", "join-registration/j-bad", false},
				{"join:ApproveNodeJoin", "join-registration/j-good", true},
				{"audit:ReadAudit", "audit/*", true},
			},
		},
		{
			name: "wildcard is only trailing",
			doc:  `{"version":"2026-01-01","statement":[{"effect":"allow","action":["*:ListTokens"],"resource":["*"]}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tc.doc))
			if tc.checks == nil {
				// "*:ListTokens" is not a wildcard: unknown action.
				if got := issuesOf(t, err); len(got) != 1 || got[0].Code != FindingUnknownAction {
					t.Fatalf("issues = %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.checks {
				if got := p.Allows(c.action, c.resource); got != c.want {
					t.Errorf("Allows(%s, %s) = %v, want %v", c.action, c.resource, got, c.want)
				}
				pr := Principal{Subject: "s", Policy: p}
				err := pr.Authorize(c.action, c.resource)
				if c.want && err != nil {
					t.Errorf("Authorize(%s) = %v", c.action, err)
				}
				if !c.want {
					if apierr.CodeOf(err) != apierr.Forbidden || !strings.Contains(err.Error(), c.action) {
						t.Errorf("Authorize(%s) = %v, want FORBIDDEN naming the action", c.action, err)
					}
				}
			}
		})
	}
	if (Policy{}).Allows("iam:CreateToken", "iam-token/*") {
		t.Error("the empty policy allows")
	}
	if !AdminPolicy().Allows("audit:ReadAudit", "audit/*") || AdminPolicy().Validate() != nil {
		t.Error("the admin policy is not a valid allow-all")
	}
}

func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, _ := storetest.Temp(t)
	return db
}

var admin = Principal{Subject: "admin@stratum.local", Policy: AdminPolicy()}

func mintToken(t *testing.T, db *store.DB, req wire.CreateTokenRequest, now time.Time) (string, wire.TokenView) {
	t.Helper()
	var secret string
	var view wire.TokenView
	err := db.Update(func(tx *store.Tx) error {
		var err error
		secret, view, err = createToken(tx, admin, req, now)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return secret, view
}

const describeOnly = `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`

func TestAuthenticate(t *testing.T) {
	db := openStore(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	good, view := mintToken(t, db, wire.CreateTokenRequest{Name: "ci", TTL: "1h", Policy: json.RawMessage(describeOnly)}, now)
	revoked, rview := mintToken(t, db, wire.CreateTokenRequest{Name: "old", TTL: "1h", Policy: json.RawMessage(describeOnly)}, now)
	if err := db.Update(func(tx *store.Tx) error { return revokeToken(tx, admin, rview.ID, now) }); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(good, "sat1."+view.ID+".") {
		t.Fatalf("token %q is not sat1.<id>.<secret>", good)
	}
	parts := strings.Split(good, ".")
	wrongSecret := parts[0] + "." + parts[1] + "." + crypto.RandomSecret(20)

	cases := []struct {
		name, bearer string
		at           time.Time
		ok           bool
	}{
		{"good", good, now, true},
		{"good just before expiry", good, now.Add(time.Hour - time.Nanosecond), true},
		{"expired at its expiry", good, now.Add(time.Hour), false},
		{"expired later", good, now.Add(48 * time.Hour), false},
		{"wrong secret", wrongSecret, now, false},
		{"revoked", revoked, now, false},
		{"empty", "", now, false},
		{"prefix only", "sat1", now, false},
		{"two parts", "sat1." + view.ID, now, false},
		{"four parts", good + ".x", now, false},
		{"other prefix", "sjt1." + parts[1] + "." + parts[2], now, false},
		{"unknown id", "sat1.tok-nothere0." + parts[2], now, false},
		{"empty id", "sat1.." + parts[2], now, false},
		{"hash instead of secret", "sat1." + view.ID + "." + crypto.HashToken(good), now, false},
	}
	var msg string
	var rows decodedRows // shared: each case reads what the ones before decoded
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p Principal
			err := db.View(func(tx *store.Tx) error {
				var err error
				p, err = authenticate(tx, tc.bearer, tc.at, &rows)
				return err
			})
			if tc.ok {
				if err != nil || p.TokenID != view.ID || p.Subject != admin.Subject+" via token "+view.ID || p.User != admin.Subject || !p.Policy.Allows("upgrade:DescribeRelease", "release/*") {
					t.Fatalf("Authenticate = %+v, %v", p, err)
				}
				return
			}
			if apierr.CodeOf(err) != apierr.Unauthenticated {
				t.Fatalf("Authenticate = %+v, %v; want UNAUTHENTICATED", p, err)
			}
			// Every failure looks the same and carries no secret.
			if msg == "" {
				msg = err.Error()
			} else if err.Error() != msg {
				t.Errorf("failure message %q differs from %q: it tells which part was wrong", err, msg)
			}
			if tc.bearer != "" && strings.Contains(err.Error(), tc.bearer) {
				t.Error("error echoes the token")
			}
		})
	}
}

func TestCreateTokenRequestProblems(t *testing.T) {
	db := openStore(t)
	now := time.Now()
	cases := []struct {
		name   string
		req    wire.CreateTokenRequest
		code   apierr.Code
		fields []string
	}{
		{"every field wrong", wire.CreateTokenRequest{TTL: "forever"}, apierr.InvalidInput, []string{"name", "ttl", "policy"}},
		{"negative ttl", wire.CreateTokenRequest{Name: "x", TTL: "-1h", Policy: json.RawMessage(describeOnly)}, apierr.InvalidInput, []string{"ttl"}},
		{"ttl over a year", wire.CreateTokenRequest{Name: "x", TTL: "9000h", Policy: json.RawMessage(describeOnly)}, apierr.InvalidInput, []string{"ttl"}},
		{"name too long", wire.CreateTokenRequest{Name: strings.Repeat("n", 129), Policy: json.RawMessage(describeOnly)}, apierr.InvalidInput, []string{"name"}},
		{"bad policy", wire.CreateTokenRequest{Name: "x", Policy: json.RawMessage(`{"version":"1"}`)}, apierr.InvalidPolicy, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := db.Update(func(tx *store.Tx) error {
				_, _, err := createToken(tx, admin, tc.req, now)
				return err
			})
			e, ok := apierr.As(err)
			if !ok || e.Code != tc.code {
				t.Fatalf("CreateToken = %v, want %s", err, tc.code)
			}
			var got []string
			for _, f := range e.Fields {
				got = append(got, f.Field)
			}
			if !reflect.DeepEqual(got, tc.fields) {
				t.Errorf("fields = %v, want %v", got, tc.fields)
			}
		})
	}
	// No refused request left a token or an audit event.
	_ = db.View(func(tx *store.Tx) error {
		if l, _ := listTokens(tx); len(l) != 0 {
			t.Errorf("refused requests left tokens: %+v", l)
		}
		return nil
	})
	if evs, _ := db.AuditEvents(0, 100); len(evs) != 0 {
		t.Errorf("refused requests left audit events: %+v", evs)
	}
}

func TestTokenLifecycle(t *testing.T) {
	db := openStore(t)
	now := time.Now()
	secret, view := mintToken(t, db, wire.CreateTokenRequest{Name: "ci", Policy: json.RawMessage(describeOnly)}, now)
	if d := view.ExpiresAt.Sub(now); d < 30*24*time.Hour-time.Second || d > 30*24*time.Hour+time.Second {
		t.Errorf("default ttl = %v, want 30 days", d)
	}
	// A login session is not listed with the API tokens.
	var sess string
	err := db.Update(func(tx *store.Tx) error {
		var err error
		sess, _, err = startSession(tx, User{Email: "admin@stratum.local"}, now)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		l, err := listTokens(tx)
		if err != nil {
			return err
		}
		if len(l) != 1 || l[0].ID != view.ID || l[0].Revoked || l[0].Kind != KindAPI {
			t.Errorf("ListTokens = %+v", l)
		}
		raw, _ := json.Marshal(l)
		if strings.Contains(string(raw), "hash") || strings.Contains(string(raw), crypto.HashToken(secret)) {
			t.Error("listed tokens carry the hash")
		}
		// Stored: only the hash.
		var stored []byte
		_ = store.Named(bucketTokens.Name()).ForEach(tx, func(_ string, v []byte) error { stored = append(stored, v...); return nil })
		for _, s := range []string{secret, sess, strings.Split(secret, ".")[2], strings.Split(sess, ".")[2]} {
			if strings.Contains(string(stored), s) {
				t.Errorf("the store holds a token secret in clear")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	revoke := func(id string) error {
		return db.Update(func(tx *store.Tx) error { return revokeToken(tx, admin, id, now) })
	}
	if err := revoke(view.ID); err != nil {
		t.Fatal(err)
	}
	if err := revoke(view.ID); apierr.CodeOf(err) != apierr.Conflict {
		t.Errorf("second revoke = %v, want CONFLICT", err)
	}
	if err := revoke("tok-nothere00"); apierr.CodeOf(err) != apierr.NotFound {
		t.Errorf("revoke of unknown = %v, want NOT_FOUND", err)
	}
	sessID := strings.Split(sess, ".")[1]
	if err := revoke(sessID); apierr.CodeOf(err) != apierr.NotFound {
		t.Errorf("revoke of a session via the API token path = %v, want NOT_FOUND", err)
	}
	evs, _ := db.AuditEvents(0, 100)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
		raw, _ := json.Marshal(ev)
		if strings.Contains(string(raw), strings.Split(secret, ".")[2]) || strings.Contains(string(raw), strings.Split(sess, ".")[2]) {
			t.Errorf("audit event %d holds a token secret", ev.Seq)
		}
	}
	if strings.Join(kinds, ",") != "iam.token.created,iam.login,iam.token.revoked" {
		t.Errorf("audit kinds = %v", kinds)
	}

	// Expired sessions are purged, live ones kept.
	err = db.Update(func(tx *store.Tx) error { return purgeExpiredSessions(tx, now.Add(SessionTTL+time.Minute)) })
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *store.Tx) error {
		if _, err := authenticate(tx, sess, now, &decodedRows{}); err == nil {
			t.Error("purged session still authenticates")
		}
		if l, _ := listTokens(tx); len(l) != 1 {
			t.Errorf("purge removed API tokens: %+v", l)
		}
		return nil
	})
}

func TestLogin(t *testing.T) {
	db := openStore(t)
	now := time.Now()
	if err := db.Update(func(tx *store.Tx) error {
		return CreateBootstrapAdmin(tx, "Admin@Stratum.Local", "pw-0123456789abcdefghij", now)
	}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		email, password string
		ok              bool
	}{
		{"admin@stratum.local", "pw-0123456789abcdefghij", true},
		{"ADMIN@stratum.local", "pw-0123456789abcdefghij", true},
		{"admin@stratum.local", "pw-0123456789abcdefghiJ", false},
		{"admin@stratum.local", "", false},
		{"nobody@stratum.local", "pw-0123456789abcdefghij", false},
		{"", "", false},
	}
	for _, tc := range cases {
		var u User
		err := db.View(func(tx *store.Tx) error {
			var err error
			u, err = checkLogin(tx, tc.email, tc.password)
			return err
		})
		if tc.ok != (err == nil) {
			t.Errorf("checkLogin(%q, %q) = %v, want ok=%v", tc.email, tc.password, err, tc.ok)
			continue
		}
		if !tc.ok {
			if apierr.CodeOf(err) != apierr.Unauthenticated || strings.Contains(err.Error(), "nobody") {
				t.Errorf("CheckLogin failure = %v", err)
			}
			continue
		}
		if u.Email != "admin@stratum.local" {
			t.Errorf("user = %+v", u)
		}
		var tok string
		var exp time.Time
		_ = db.Update(func(tx *store.Tx) error {
			tok, exp, err = startSession(tx, u, now)
			return err
		})
		if err != nil || !exp.Equal(now.Add(SessionTTL).UTC()) {
			t.Fatalf("StartSession = %v, %v", exp, err)
		}
		_ = db.View(func(tx *store.Tx) error {
			p, err := authenticate(tx, tok, now, &decodedRows{})
			if err != nil || p.Subject != "admin@stratum.local via session "+p.TokenID || p.User != "admin@stratum.local" || p.Kind != KindSession || !p.Policy.Allows("iam:CreateToken", "iam-token/*") {
				t.Errorf("session principal = %+v, %v", p, err)
			}
			return nil
		})
	}
}

// A token decoded on one request and revoked before the next is refused
// on the next: the decoded row is kept only while its bytes are the same.
func TestAuthenticateAfterRevocation(t *testing.T) {
	db := openStore(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tok, view := mintToken(t, db, wire.CreateTokenRequest{Name: "ci", TTL: "1h", Policy: json.RawMessage(describeOnly)}, now)
	var rows decodedRows
	auth := func() error {
		return db.View(func(tx *store.Tx) error {
			_, err := authenticate(tx, tok, now, &rows)
			return err
		})
	}
	for range 2 {
		if err := auth(); err != nil {
			t.Fatalf("before the revocation: %v", err)
		}
	}
	if err := db.Update(func(tx *store.Tx) error { return revokeToken(tx, admin, view.ID, now) }); err != nil {
		t.Fatal(err)
	}
	if err := auth(); apierr.CodeOf(err) != apierr.Unauthenticated {
		t.Fatalf("after the revocation: %v, want UNAUTHENTICATED", err)
	}
}
