package founder

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/releaseset"
)

func (f *testFounder) apiToken(actions ...string) string {
	f.t.Helper()
	var out struct{ Token string }
	policy := map[string]any{"version": "2026-01-01", "statement": []any{map[string]any{"effect": "allow", "action": actions, "resource": []string{"*"}}}}
	f.admin("POST", "/v1/iam/tokens", map[string]any{"name": "limited", "ttl": "1h", "policy": policy}, 201, &out)
	return out.Token
}

// TestAuthorization: a token limited to upgrade:DescribeRelease reads the
// release set and nothing else; authorization names the action.
func TestAuthorization(t *testing.T) {
	f := startFounder(t, nil, nil)
	describe := f.apiToken("upgrade:DescribeRelease")
	c := f.adminCli
	for _, r := range []struct{ method, path, action string }{
		{"POST", "/v1/admin/join/tokens", "join:CreateJoinToken"},
		{"GET", "/v1/admin/join/tokens", "join:ListJoinTokens"},
		{"DELETE", "/v1/admin/join/tokens/jt-x", "join:RevokeJoinToken"},
		{"POST", "/v1/admin/join/registrations/j-x/approve", "join:ApproveNodeJoin"},
		{"GET", "/v1/admin/cluster/members", "cluster:ListMembers"},
		{"GET", "/v1/admin/audit", "audit:ReadAudit"},
	} {
		e := call(t, c, r.method, f.api+r.path, describe, map[string]any{"role": "worker"}, 403, nil)
		if e.Code != apierr.Forbidden || !strings.Contains(e.Message, r.action) {
			t.Errorf("%s %s: %+v, want FORBIDDEN naming %s", r.method, r.path, e, r.action)
		}
	}
	call(t, c, "GET", f.api+"/v1/admin/upgrades/release", describe, nil, 200, nil)

	members := f.apiToken("cluster:ListMembers")
	if e := call(t, c, "GET", f.api+"/v1/admin/upgrades/release", members, nil, 403, nil); !strings.Contains(e.Message, "upgrade:DescribeRelease") {
		t.Errorf("release set without the action: %+v", e)
	}
	// No token, a bad token: 401 before any 403.
	if e := call(t, c, "POST", f.api+"/v1/admin/join/tokens", "", nil, 401, nil); e.Code != apierr.Unauthenticated {
		t.Errorf("no token: %+v", e)
	}
	if e := call(t, c, "POST", f.api+"/v1/admin/join/tokens", "sat1.tok-x.y", nil, 401, nil); e.Code != apierr.Unauthenticated {
		t.Errorf("bad token: %+v", e)
	}
}

// TestReleaseRecords: nodes record their own release only; the set shows
// consistency exactly.
func TestReleaseRecords(t *testing.T) {
	f := startFounder(t, nil, nil)
	token := f.joinToken("worker", 1)
	j, v, node, nodeCli := f.deliveredJoin(t, token, "192.0.2.41")

	var set releaseset.Set
	f.admin("GET", "/v1/admin/upgrades/release", nil, 200, &set)
	if set.Summary.Consistent || len(set.Summary.Drift) != 1 || set.Summary.Drift[0].NodeID != node || set.Summary.Drift[0].Kind != releaseset.DriftReport {
		t.Fatalf("a member that never recorded: %+v", set.Summary)
	}

	founderNode := set.Node
	rec := map[string]any{"runningRelease": "0.1.0", "release": map[string]any{"imageMode": false, "os": map[string]any{"prettyName": "Debian", "id": "debian", "versionId": "12", "kernel": "6.1"}}}
	if e := call(t, nodeCli, "PUT", f.api+"/v1/cluster/nodes/"+founderNode+"/release", "", rec, 403, nil); e.Code != apierr.Forbidden {
		t.Fatalf("a node recording another's release: %+v", e)
	}
	// Still delivering: the delivery can be cancelled, so what the node
	// says about itself does not count yet (SPEC 10.2).
	if e := call(t, nodeCli, "PUT", f.api+"/v1/cluster/nodes/"+node+"/release", "", rec, 403, nil); e.Code != apierr.Forbidden {
		t.Fatalf("a delivering node recording its release: %+v", e)
	}
	j.do(t, "POST", "/v1/join/registrations/"+v.JoinID+"/progress", map[string]any{"phase": "installing"}, 200, nil)
	call(t, nodeCli, "PUT", f.api+"/v1/cluster/nodes/"+node+"/release", "", rec, 204, nil)
	f.admin("PUT", "/v1/cluster/nodes/n-zzzzzzzz/release", rec, 404, nil)
	bad := map[string]any{"runningRelease": "x", "release": map[string]any{"bogus": 1}}
	if e := call(t, nodeCli, "PUT", f.api+"/v1/cluster/nodes/"+node+"/release", "", bad, 400, nil); len(e.Fields) < 2 {
		t.Fatalf("bad record: %+v", e)
	}
	f.admin("GET", "/v1/admin/upgrades/release", nil, 200, &set)
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
		req, _ := http.NewRequest("GET", f.api+"/v1/admin/upgrades/release", nil)
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Accept-Encoding", enc)
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true, TLSClientConfig: &tls.Config{RootCAs: f.caPool}}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != enc {
			t.Errorf("Accept-Encoding %s answered %q", enc, resp.Header.Get("Content-Encoding"))
		}
	}
}
