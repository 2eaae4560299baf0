package founder

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// apiToken creates an API token allowed actions on everything, as the
// operator op.
func apiToken(t *testing.T, op *stratumtest.Client, actions ...string) string {
	t.Helper()
	var out struct{ Token string }
	policy := map[string]any{"version": "2026-01-01", "statement": []any{map[string]any{"effect": "allow", "action": actions, "resource": []string{"*"}}}}
	op.Must(t, "POST", "/v1/iam/tokens", map[string]any{"name": "limited", "ttl": "1h", "policy": policy}, 201, &out)
	return out.Token
}

// TestAuthorization: a token limited to upgrade:DescribeRelease reads the
// release set and nothing else; authorization names the action.
func TestAuthorization(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	describe := apiToken(t, op, "upgrade:DescribeRelease")
	for _, r := range []struct{ method, path, action string }{
		{"POST", "/v1/admin/join/tokens", "join:CreateJoinToken"},
		{"GET", "/v1/admin/join/tokens", "join:ListJoinTokens"},
		{"DELETE", "/v1/admin/join/tokens/jt-x", "join:RevokeJoinToken"},
		{"POST", "/v1/admin/join/registrations/j-x/approve", "join:ApproveNodeJoin"},
		{"GET", "/v1/admin/cluster/members", "cluster:ListMembers"},
		{"POST", "/v1/admin/cluster/members/n-x/remove", "cluster:RemoveMember"},
		{"POST", "/v1/admin/cluster/members/n-x/replace", "cluster:ReplaceMember"},
		{"PUT", "/v1/admin/inventory", "inventory:PutInventory"},
		{"GET", "/v1/admin/inventory", "inventory:GetInventory"},
		{"GET", "/v1/admin/audit", "audit:ReadAudit"},
	} {
		e := op.As(describe).Must(t, r.method, r.path, map[string]any{"role": "worker"}, 403, nil)
		if e.Code != apierr.Forbidden || !strings.Contains(e.Message, r.action) {
			t.Errorf("%s %s: %+v, want FORBIDDEN naming %s", r.method, r.path, e, r.action)
		}
	}
	op.As(describe).Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, nil)

	members := apiToken(t, op, "cluster:ListMembers")
	if e := op.As(members).Must(t, "GET", "/v1/admin/upgrades/release", nil, 403, nil); !strings.Contains(e.Message, "upgrade:DescribeRelease") {
		t.Errorf("release set without the action: %+v", e)
	}
	// No token, a bad token: 401 before any 403.
	if e := op.As("").Must(t, "POST", "/v1/admin/join/tokens", nil, 401, nil); e.Code != apierr.Unauthenticated {
		t.Errorf("no token: %+v", e)
	}
	if e := op.As("sat1.tok-x.y").Must(t, "POST", "/v1/admin/join/tokens", nil, 401, nil); e.Code != apierr.Unauthenticated {
		t.Errorf("bad token: %+v", e)
	}
}

// TestReleaseRecords: nodes record their own release only; the set shows
// consistency exactly.
func TestReleaseRecords(t *testing.T) {
	// In this process: the founder's own record must show a known build
	// (commit abcdef12), which a binary built from a changed tree lacks.
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true, Serve: serveIn(nil)})
	op := f.Operator(t)
	token := joinToken(t, op, "worker", 1)
	j, v, node, nodeCli := deliveredJoin(t, f, token, "192.0.2.41")

	var set wire.ReleaseSet
	op.Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &set)
	if set.Summary.Consistent || len(set.Summary.Drift) != 1 || set.Summary.Drift[0].NodeID != node || set.Summary.Drift[0].Kind != wire.DriftReport {
		t.Fatalf("a member that never recorded: %+v", set.Summary)
	}

	founderNode := set.Node
	rec := map[string]any{"runningRelease": "0.1.0", "release": map[string]any{"imageMode": false, "os": map[string]any{"prettyName": "Debian", "id": "debian", "versionId": "12", "kernel": "6.1"}}}
	if e := nodeCli.Must(t, "PUT", "/v1/cluster/nodes/"+founderNode+"/release", rec, 403, nil); e.Code != apierr.Forbidden {
		t.Fatalf("a node recording another's release: %+v", e)
	}
	// Still delivering: the delivery can be cancelled, so what the node
	// says about itself does not count yet (SPEC 10.2).
	if e := nodeCli.Must(t, "PUT", "/v1/cluster/nodes/"+node+"/release", rec, 403, nil); e.Code != apierr.Forbidden {
		t.Fatalf("a delivering node recording its release: %+v", e)
	}
	j.Must(t, "POST", "/v1/join/registrations/"+v.JoinID+"/progress", map[string]any{"phase": "installing"}, 200, nil)
	nodeCli.Must(t, "PUT", "/v1/cluster/nodes/"+node+"/release", rec, 204, nil)
	op.Must(t, "PUT", "/v1/cluster/nodes/n-zzzzzzzz/release", rec, 404, nil)
	bad := map[string]any{"runningRelease": "x", "release": map[string]any{"bogus": 1}}
	if e := nodeCli.Must(t, "PUT", "/v1/cluster/nodes/"+node+"/release", bad, 400, nil); len(e.Fields) < 2 {
		t.Fatalf("bad record: %+v", e)
	}
	op.Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &set)
	if set.Summary.Recent != 2 || set.RunningRelease != "0.1.0" {
		t.Fatalf("after recording: %+v", set.Summary)
	}
	if set.Summary.Consistent == (len(set.Summary.Skew) > 0 || len(set.Summary.Drift) > 0) {
		t.Fatalf("consistent=%v disagrees with skew %v / drift %v", set.Summary.Consistent, set.Summary.Skew, set.Summary.Drift)
	}
	// The founder's own record is a different host description, so the
	// set must say where they differ.
	if len(set.Summary.Skew) == 0 {
		t.Fatalf("no skew between the founder's host and the recorded node: %+v", set.Summary)
	}

	// Compression when accepted.
	for _, enc := range []string{"gzip", "zstd"} {
		req, _ := http.NewRequest("GET", "https://"+f.API+"/v1/admin/upgrades/release", nil)
		req.Header.Set("Authorization", "Bearer "+op.Token)
		req.Header.Set("Accept-Encoding", enc)
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true, TLSClientConfig: &tls.Config{RootCAs: f.Pool}}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != enc {
			t.Errorf("Accept-Encoding %s answered %q", enc, resp.Header.Get("Content-Encoding"))
		}
	}
}
