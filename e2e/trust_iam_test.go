package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// policyDoc builds a policy document from statements of
// {effect, actions, resources}.
func policyDoc(stmts ...[3]any) json.RawMessage {
	var st []map[string]any
	for _, s := range stmts {
		st = append(st, map[string]any{"effect": s[0], "action": s[1], "resource": s[2]})
	}
	b, _ := json.Marshal(map[string]any{"version": "2026-01-01", "statement": st})
	return b
}

func allow(actions ...string) [3]any { return [3]any{"allow", actions, []string{"*"}} }

// errorBody is the envelope of SPEC section 2.
type errorBody struct {
	Code   string `json:"code"`
	Issues []struct {
		Code      string `json:"code"`
		Statement int    `json:"statement"`
		Action    string `json:"action"`
	} `json:"issues"`
	Fields []struct{ Field string } `json:"fields"`
}

// mint asks for a token with caller and returns the status, the new
// token and the error envelope.
func mint(t testing.TB, f *stratumtest.Founder, caller, ttl string, policy json.RawMessage) (int, apiToken, errorBody) {
	t.Helper()
	body := map[string]any{"name": "child", "policy": policy}
	if ttl != "" {
		body["ttl"] = ttl
	}
	status, raw, err := call(f, "POST", "/v1/iam/tokens", caller, body)
	if err != nil {
		t.Fatal(err)
	}
	var tok apiToken
	var e errorBody
	if status == 201 {
		_ = json.Unmarshal(raw, &tok)
	} else {
		_ = json.Unmarshal(raw, &e)
	}
	return status, tok, e
}

// auditEvents reads the whole audit log with token.
func auditEvents(t testing.TB, f *stratumtest.Founder, token string) []struct {
	Kind, Actor, Subject string
	Data                 map[string]string
} {
	t.Helper()
	status, raw, err := call(f, "GET", "/v1/admin/audit?limit=1000", token, nil)
	if err != nil || status != 200 {
		t.Fatalf("audit: %d %s %v", status, raw, err)
	}
	var out struct {
		Events []struct {
			Kind, Actor, Subject string
			Data                 map[string]string
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Events
}

// Issue 10 item 1: a token allowed only iam:CreateToken minted `*` on `*`
// for a year, outlived its parent, and the audit named the admin user.
func TestTrust01_TokenCannotOutgrowCreator(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)
	admin := f.Login(t, email, password).Token

	status, creator, _ := mint(t, f, admin, "1h", policyDoc(allow("iam:CreateToken")))
	if status != 201 {
		t.Fatalf("admin creating a create-only token: %d", status)
	}

	// The attack as found: `*` on `*` for a year.
	status, _, e := mint(t, f, creator.Token, "8760h", policyDoc(allow("*")))
	if status != 403 || e.Code != "FORBIDDEN" || len(e.Issues) != 1 || e.Issues[0].Statement != 0 || e.Issues[0].Action != "*" || e.Issues[0].Code != "EXCEEDS_CALLER" {
		t.Fatalf("create-only token minting * on * = %d %+v, want 403 naming statement 0 action *", status, e)
	}
	// Every statement and action beyond the caller is named.
	status, _, e = mint(t, f, creator.Token, "10m", policyDoc(allow("iam:CreateToken"), allow("audit:ReadAudit", "iam:CreateToken", "join:*")))
	if status != 403 || len(e.Issues) != 2 || e.Issues[0].Statement != 1 || e.Issues[0].Action != "audit:ReadAudit" || e.Issues[1].Action != "join:*" {
		t.Fatalf("two excess actions = %d %+v", status, e)
	}
	// Expiry: never past the caller's.
	if status, _, _ := mint(t, f, creator.Token, "2h", policyDoc(allow("iam:CreateToken"))); status != 403 {
		t.Fatalf("a child outliving its 1h parent = %d, want 403", status)
	}
	// Within the caller: allowed, and the default lifetime shrinks to the caller's.
	status, child, _ := mint(t, f, creator.Token, "", policyDoc(allow("iam:CreateToken")))
	if status != 201 {
		t.Fatalf("a child equal to its parent = %d", status)
	}
	status, grandchild, _ := mint(t, f, child.Token, "30m", policyDoc(allow("iam:CreateToken")))
	if status != 201 {
		t.Fatalf("a grandchild = %d", status)
	}

	// Trailing-* patterns compare as prefixes.
	_, getOnly, _ := mint(t, f, admin, "1h", policyDoc(allow("iam:CreateToken", "join:Get*")))
	if status, _, e := mint(t, f, getOnly.Token, "10m", policyDoc(allow("join:*"))); status != 403 || e.Issues[0].Action != "join:*" {
		t.Errorf("join:* under join:Get* = %d %+v, want 403", status, e)
	}
	if status, _, _ := mint(t, f, getOnly.Token, "10m", policyDoc(allow("join:GetRegistration"))); status != 201 {
		t.Errorf("join:GetRegistration under join:Get* = %d, want 201", status)
	}
	// A caller's deny is not escaped by a child, unless the child keeps it.
	deny := [3]any{"deny", []string{"join:ApproveNodeJoin"}, []string{"join-registration/*"}}
	_, denied, _ := mint(t, f, admin, "1h", policyDoc(allow("*"), deny))
	if status, _, e := mint(t, f, denied.Token, "10m", policyDoc(allow("join:*"))); status != 403 || e.Issues[0].Action != "join:*" {
		t.Errorf("a child dropping its caller's deny = %d %+v, want 403", status, e)
	}
	if status, _, _ := mint(t, f, denied.Token, "10m", policyDoc(allow("join:*"), deny)); status != 201 {
		t.Errorf("a child keeping its caller's deny = %d, want 201", status)
	}

	// Revocation cascades: the parent's revocation ends its descendants.
	if status, _, _ := call(f, "GET", "/v1/iam/tokens", grandchild.Token, nil); status != 403 {
		t.Fatalf("grandchild before revocation = %d, want 403 (authenticated)", status)
	}
	if status, body, _ := call(f, "DELETE", "/v1/iam/tokens/"+creator.ID, admin, nil); status != 204 {
		t.Fatalf("revoke creator = %d %s", status, body)
	}
	for name, tok := range map[string]apiToken{"child": child, "grandchild": grandchild} {
		if status, _, _ := call(f, "GET", "/v1/iam/tokens", tok.Token, nil); status != 401 {
			t.Errorf("%s after its ancestor's revocation = %d, want 401", name, status)
		}
		if status, _, _ := mint(t, f, tok.Token, "1m", policyDoc(allow("iam:CreateToken"))); status != 401 {
			t.Errorf("%s minting after its ancestor's revocation = %d, want 401", name, status)
		}
	}

	// The audit names the acting principal, not only the user behind it.
	var childEvent, revokedGrandchild bool
	for _, ev := range auditEvents(t, f, admin) {
		if ev.Kind == "iam.token.created" && ev.Subject == child.ID {
			childEvent = true
			if ev.Actor != email+" via token "+creator.ID || ev.Data["parent"] != creator.ID || ev.Data["user"] != email {
				t.Errorf("child's creation event = %+v, want actor %s via token %s", ev, email, creator.ID)
			}
		}
		if ev.Kind == "iam.token.created" && ev.Subject == creator.ID && !strings.HasPrefix(ev.Actor, email+" via session ") {
			t.Errorf("creator's creation event actor %q, want %s via session <id>", ev.Actor, email)
		}
		if ev.Kind == "iam.token.revoked" && ev.Subject == grandchild.ID && ev.Data["cascadeFrom"] == creator.ID {
			revokedGrandchild = true
		}
	}
	if !childEvent || !revokedGrandchild {
		t.Errorf("audit lacks the child's creation (%v) or the grandchild's cascaded revocation (%v)", childEvent, revokedGrandchild)
	}
	var list struct {
		Tokens []struct {
			ID        string `json:"tokenId"`
			Parent    string `json:"parent"`
			CreatedBy string `json:"createdBy"`
			Revoked   bool   `json:"revoked"`
		} `json:"tokens"`
	}
	_, raw, _ := call(f, "GET", "/v1/iam/tokens", admin, nil)
	_ = json.Unmarshal(raw, &list)
	for _, tk := range list.Tokens {
		if tk.ID == grandchild.ID && (tk.Parent != child.ID || tk.CreatedBy != email+" via token "+child.ID || !tk.Revoked) {
			t.Errorf("grandchild listed as %+v", tk)
		}
	}
}

// fromSource is a client of f whose connections come from the loopback
// address ip, so the founder sees another source.
func fromSource(t testing.TB, f *stratumtest.Founder, ip string) *http.Client {
	tr := f.Client.Transport.(*http.Transport).Clone()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr.DialContext = d.DialContext
	tr.TLSClientConfig = tr.TLSClientConfig.Clone()
	tr.TLSClientConfig.MinVersion = tls.VersionTLS12
	c := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// loginFrom posts a login with c (a client bound to one source address)
// and returns the status and headers (status 0 when no answer came).
func loginFrom(c *http.Client, api, email, password string) (int, http.Header) {
	b, _ := json.Marshal(map[string]string{"email": email, "password": password})
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "https://"+api+"/v1/auth/login", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// Issue 10 item 6: sessions could not be listed, revoked or logged out,
// the password not changed, and only the source was rate limited.
func TestTrust06_SessionsListRevokeLogoutPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)
	s1 := f.Login(t, email, password).Token
	s2 := f.Login(t, email, password).Token
	s3 := f.Login(t, email, password).Token
	sessionID := func(tok string) string { return strings.Split(tok, ".")[1] }

	status, raw, _ := call(f, "GET", "/v1/iam/sessions", s1, nil)
	if status != 200 {
		t.Fatalf("list sessions = %d %s", status, raw)
	}
	for _, s := range []string{s1, s2, s3} {
		if !strings.Contains(string(raw), `"tokenId":"`+sessionID(s)+`"`) {
			t.Errorf("session %s not listed: %s", sessionID(s), raw)
		}
		if strings.Contains(string(raw), strings.Split(s, ".")[2]) || strings.Contains(string(raw), `"hash"`) {
			t.Fatalf("the session list holds a secret or a hash: %s", raw)
		}
	}
	cliArgs := []string{"--api", "https://" + f.API, "--ca-file", dir + "/ca.pem"}
	if r := stratumEnv(t, []string{"STRATUM_TOKEN=" + s1}, append([]string{"sessions", "list"}, cliArgs...)...); r.code != 0 || !strings.Contains(r.stdout, sessionID(s3)) {
		t.Errorf("stratum sessions list = %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A token without iam:ListSessions is refused.
	_, describe, _ := mint(t, f, s1, "1h", policyDoc(allow("upgrade:DescribeRelease")))
	if status, _, _ := call(f, "GET", "/v1/iam/sessions", describe.Token, nil); status != 403 {
		t.Errorf("list sessions without the action = %d, want 403", status)
	}
	// An API token cannot log out or change the password.
	if status, _, _ := call(f, "POST", "/v1/auth/logout", describe.Token, nil); status != 403 {
		t.Errorf("logout with an API token = %d, want 403", status)
	}

	// Revoke one session: it stops working at once.
	if status, raw, _ := call(f, "DELETE", "/v1/iam/sessions/"+sessionID(s2), s1, nil); status != 204 {
		t.Fatalf("revoke session = %d %s", status, raw)
	}
	if status, _, _ := call(f, "GET", "/v1/iam/tokens", s2, nil); status != 401 {
		t.Errorf("revoked session = %d, want 401", status)
	}
	if status, _, _ := call(f, "DELETE", "/v1/iam/sessions/"+sessionID(s2), s1, nil); status != 409 {
		t.Errorf("revoking twice = %d, want 409", status)
	}
	if status, _, _ := call(f, "DELETE", "/v1/iam/sessions/tok-nosuchthing", s1, nil); status != 404 {
		t.Errorf("revoking an unknown session = %d, want 404", status)
	}

	// Password change: bad input first, and nothing changes.
	for _, tc := range []struct {
		body   map[string]string
		status int
		field  string
	}{
		{map[string]string{"currentPassword": password, "newPassword": "short"}, 400, "newPassword"},
		{map[string]string{"currentPassword": "wrong-password-123", "newPassword": "a-new-password-1"}, 403, "currentPassword"},
		{map[string]string{"currentPassword": password}, 400, "newPassword"},
	} {
		status, raw, _ := call(f, "POST", "/v1/auth/password", s1, tc.body)
		var e errorBody
		_ = json.Unmarshal(raw, &e)
		if status != tc.status || len(e.Fields) == 0 || e.Fields[0].Field != tc.field {
			t.Errorf("password change %v = %d %s, want %d naming %s", tc.body, status, raw, tc.status, tc.field)
		}
	}
	if status, _, _ := call(f, "GET", "/v1/iam/tokens", s3, nil); status != 200 {
		t.Fatalf("a refused password change ended a session: %d", status)
	}
	if status, _, _ := call(f, "POST", "/v1/auth/password", describe.Token, map[string]string{"currentPassword": password, "newPassword": "a-new-password-1"}); status != 403 {
		t.Errorf("password change with an API token = %d, want 403", status)
	}
	newPassword := "correct-horse-battery"
	if status, raw, _ := call(f, "POST", "/v1/auth/password", s1, map[string]string{"currentPassword": password, "newPassword": newPassword}); status != 204 {
		t.Fatalf("password change = %d %s", status, raw)
	}
	if status, _, _ := call(f, "GET", "/v1/iam/tokens", s3, nil); status != 401 {
		t.Errorf("another session after the password change = %d, want 401", status)
	}
	if status, _, _ := call(f, "GET", "/v1/iam/tokens", s1, nil); status != 200 {
		t.Errorf("the changing session after the change = %d, want 200", status)
	}
	if status, _, _ := call(f, "POST", "/v1/auth/login", "", map[string]string{"email": email, "password": password}); status != 401 {
		t.Errorf("login with the old password = %d, want 401", status)
	}
	s4 := f.Login(t, email, newPassword).Token

	// Logout ends the calling session and the tokens made under it.
	_, underS4, _ := mint(t, f, s4, "1h", policyDoc(allow("iam:ListTokens")))
	if status, _, _ := call(f, "POST", "/v1/auth/logout", s4, nil); status != 204 {
		t.Fatalf("logout = %d", status)
	}
	for name, tok := range map[string]string{"logged-out session": s4, "its token": underS4.Token} {
		if status, _, _ := call(f, "GET", "/v1/iam/tokens", tok, nil); status != 401 {
			t.Errorf("%s after logout = %d, want 401", name, status)
		}
	}
	kinds := map[string]string{}
	for _, ev := range auditEvents(t, f, s1) {
		kinds[ev.Kind] = ev.Actor
	}
	if via := email + " via session "; kinds["iam.logout"] != via+sessionID(s4) || kinds["iam.password.changed"] != via+sessionID(s1) || kinds["iam.session.revoked"] != via+sessionID(s1) {
		t.Errorf("audit actors = %v", kinds)
	}
	if r := stratumEnv(t, []string{"STRATUM_TOKEN=" + s1}, append([]string{"logout"}, cliArgs...)...); r.code != 0 {
		t.Errorf("stratum logout = %d %q", r.code, r.stderr)
	}
	if status, _, _ := call(f, "GET", "/v1/iam/tokens", s1, nil); status != 401 {
		t.Errorf("session after stratum logout = %d, want 401", status)
	}
}

// Login failures are limited per source; many sources guessing one
// account slow it without locking out its operator.
func TestTrust06_LoginLimitedPerSourceAndAccount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)

	one := fromSource(t, f, "127.0.0.2")
	var last int
	var hdr http.Header
	for i := 0; i < 6; i++ {
		last, hdr = loginFrom(one, f.API, "nobody@stratum.local", "guess")
	}
	if last != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("sixth attempt from one source = %d (Retry-After %q), want 429 with Retry-After", last, hdr.Get("Retry-After"))
	}

	// Ten failures for the admin spread over ten sources slow the account
	// but never lock it for a source that has not failed (SPEC 16.5).
	for i := 0; i < 10; i++ {
		c := fromSource(t, f, fmt.Sprintf("127.0.1.%d", i+1))
		if status, _ := loginFrom(c, f.API, email, "guess-"+fmt.Sprint(i)); status != 401 {
			t.Fatalf("failure %d = %d, want 401", i, status)
		}
	}
	fresh := fromSource(t, f, "127.0.2.1")
	if status, _ := loginFrom(fresh, f.API, email, password); status != 200 {
		t.Fatalf("right password from a fresh source after ten failures for the account = %d, want 200", status)
	}
	if status, _ := loginFrom(fromSource(t, f, "127.0.2.2"), f.API, "other@stratum.local", "guess"); status != 401 {
		t.Errorf("another account from a fresh source = %d, want 401 (not limited)", status)
	}
}
