package founder

import (
	"stratum/wire"
	"testing"

	"stratum/internal/stratumtest"
)

// Issue 10 item 10 (list filtering): a deny on one registration was
// bypassed by listing the collection. Every list answers only the items
// the caller may read.
func TestTrust10_ListsAnswerOnlyReadableItems(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	var jt1, jt2 wire.JoinToken
	op.Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker", "ttl": "1h", "uses": 2}, 201, &jt1)
	op.Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker", "ttl": "1h", "uses": 1}, 201, &jt2)
	hidden, _ := register(t, f.Joiner(t, nil), jt1.Token, "0.1.0", "192.0.2.31", 201)
	shown, _ := register(t, f.Joiner(t, nil), jt1.Token, "0.1.0", "192.0.2.32", 201)

	var members wire.MembersView
	op.Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
	if len(members.Members) == 0 {
		t.Fatal("no member to hide: the founder itself should be one")
	}
	hiddenMember := members.Members[0].NodeID
	for _, rel := range []string{"0.2.0", "0.3.0"} {
		tree := trustedTree(t, f, rel, 1<<20).Dir
		op.Must(t, "POST", "/v1/admin/releases", map[string]string{"path": tree}, 201, nil)
	}

	var created struct {
		Token string `json:"token"`
		ID    string `json:"tokenId"`
	}
	policy := map[string]any{"version": "2026-01-01", "statement": []any{
		map[string]any{"effect": "allow", "action": []string{"join:ListRegistrations", "join:GetRegistration", "join:ListJoinTokens", "cluster:ListMembers", "iam:ListTokens", "iam:ListSessions", "upgrade:DescribeRelease"}, "resource": []string{"*"}},
		map[string]any{"effect": "deny", "action": []string{"upgrade:DescribeRelease"}, "resource": []string{"release/0.2.0"}},
		map[string]any{"effect": "deny", "action": []string{"join:GetRegistration"}, "resource": []string{"join-registration/" + hidden.JoinID}},
		map[string]any{"effect": "deny", "action": []string{"join:ListJoinTokens"}, "resource": []string{"join-token/" + jt2.TokenID}},
		map[string]any{"effect": "deny", "action": []string{"cluster:ListMembers"}, "resource": []string{"member/" + hiddenMember}},
		map[string]any{"effect": "deny", "action": []string{"iam:ListTokens", "iam:ListSessions"}, "resource": []string{"iam-token/tok-*", "iam-session/tok-*"}},
	}}
	op.Must(t, "POST", "/v1/iam/tokens", map[string]any{"name": "scoped", "ttl": "1h", "policy": policy}, 201, &created)
	scoped := op.As(created.Token)

	// The single read is refused, and so is the list's copy of it.
	scoped.Must(t, "GET", "/v1/admin/join/registrations/"+hidden.JoinID, nil, 403, nil)
	var regs struct {
		Registrations []wire.OperatorView `json:"registrations"`
	}
	scoped.Must(t, "GET", "/v1/admin/join/registrations", nil, 200, &regs)
	var ids []string
	for _, r := range regs.Registrations {
		ids = append(ids, r.JoinID)
	}
	if len(ids) != 1 || ids[0] != shown.JoinID {
		t.Fatalf("listed registrations %v, want only %s (not the denied %s)", ids, shown.JoinID, hidden.JoinID)
	}
	// The admin still sees both.
	var all struct {
		Registrations []wire.OperatorView `json:"registrations"`
	}
	op.Must(t, "GET", "/v1/admin/join/registrations", nil, 200, &all)
	if len(all.Registrations) != 2 {
		t.Fatalf("admin sees %d registrations, want 2", len(all.Registrations))
	}

	var toks struct {
		Tokens []wire.JoinTokenView `json:"tokens"`
	}
	scoped.Must(t, "GET", "/v1/admin/join/tokens", nil, 200, &toks)
	if len(toks.Tokens) != 1 || toks.Tokens[0].TokenID != jt1.TokenID {
		t.Errorf("listed join tokens %+v, want only %s", toks.Tokens, jt1.TokenID)
	}

	var mv wire.MembersView
	scoped.Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &mv)
	for _, m := range mv.Members {
		if m.NodeID == hiddenMember {
			t.Errorf("denied member %s listed", hiddenMember)
		}
	}

	var rels struct {
		Releases []struct{ Release string } `json:"releases"`
	}
	scoped.Must(t, "GET", "/v1/admin/releases", nil, 200, &rels)
	if len(rels.Releases) != 1 || rels.Releases[0].Release != "0.3.0" {
		t.Errorf("listed releases %+v, want only 0.3.0", rels.Releases)
	}

	// Lists of IAM tokens and sessions: every item denied, an empty list
	// (never null, never the items).
	for path, key := range map[string]string{"/v1/iam/tokens": "tokens", "/v1/iam/sessions": "sessions"} {
		var raw map[string][]map[string]any
		scoped.Must(t, "GET", path, nil, 200, &raw)
		if v, ok := raw[key]; !ok || v == nil || len(v) != 0 {
			t.Errorf("%s = %v, want %q: []", path, raw, key)
		}
	}
}
