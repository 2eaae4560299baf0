package founder

import (
	"crypto/tls"
	"encoding/json"
	"slices"
	"testing"

	"stratum/apierr"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// TestTrust09_OneStrictDecoder (SPEC 10.9) attacks every body-taking
// endpoint of both listeners of a running founder with three ambiguous
// bodies: a key given twice (encoding/json would let the last one win), a
// key differing from a field only by case (encoding/json would match it)
// and an unknown key. Each must be 400 INVALID_INPUT naming the key by
// its path, and change nothing (no audit event is written).
func TestTrust09_OneStrictDecoder(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	token := joinToken(t, op, "worker", 10)

	// A registration that was approved and delivered: its node leaf
	// speaks for a member, and it reports installing (a real member).
	member, v, node, nodeCli := deliveredJoin(t, f, token, "192.0.2.61")
	member.Must(t, "POST", "/v1/join/registrations/"+v.JoinID+"/progress", map[string]string{"phase": "installing"}, 200, nil)

	// A pending registration, for approve, reject and cancel.
	pending := f.Joiner(t, nil)
	p, _ := register(t, pending, token, "0.1.0", "192.0.2.62", 201)
	adminReq := func(method, path string, body json.RawMessage) *apierr.Error {
		return op.Must(t, method, path, body, 400, nil)
	}
	nodeReq := func(method, path string, body json.RawMessage) *apierr.Error {
		return nodeCli.Must(t, method, path, body, 400, nil)
	}
	joinerReq := func(j *stratumtest.Client) func(method, path string, body json.RawMessage) *apierr.Error {
		return func(method, path string, body json.RawMessage) *apierr.Error {
			return j.Must(t, method, path, body, 400, nil)
		}
	}
	anonymous := func(method, path string, body json.RawMessage) *apierr.Error {
		return f.AdminClient().Must(t, method, path, body, 400, nil)
	}

	// Each endpoint has three bodies: duplicate, case variant, unknown;
	// path is the field path the answer must name for each.
	type attack struct{ body, path string }
	routes := []struct {
		name, method, url string
		send              func(method, path string, body json.RawMessage) *apierr.Error
		attacks           [3]attack
	}{
		{"login", "POST", "/v1/auth/login", anonymous, [3]attack{
			{`{"email":"a@b.c","password":"x","password":"y"}`, "password"},
			{`{"email":"a@b.c","password":"x","Password":"y"}`, "Password"},
			{`{"email":"a@b.c","password":"x","rememberMe":true}`, "rememberMe"}}},
		{"iam token", "POST", "/v1/iam/tokens", adminReq, [3]attack{
			{`{"name":"ci","name":"admin"}`, "name"},
			{`{"name":"ci","NAME":"admin"}`, "NAME"},
			{`{"name":"ci","superuser":true}`, "superuser"}}},
		{"join token", "POST", "/v1/admin/join/tokens", adminReq, [3]attack{
			{`{"role":"worker","role":"postgres"}`, "role"},
			{`{"role":"worker","Role":"postgres"}`, "Role"},
			{`{"role":"worker","expires":"never"}`, "expires"}}},
		{"approve", "POST", "/v1/admin/join/registrations/" + p.JoinID + "/approve", adminReq, [3]attack{
			{`{"networks":{"storage":{"ip":"10.9.0.1","ip":"10.9.0.2"}}}`, "networks.storage.ip"},
			{`{"mgmtIp":"192.0.2.62","mgmtIP":"192.0.2.99"}`, "mgmtIP"},
			{`{"labels":{},"networks":{"storage":{"ip":"10.9.0.1","vlan":9}}}`, "networks.storage.vlan"}}},
		{"reject", "POST", "/v1/admin/join/registrations/" + p.JoinID + "/reject", adminReq, [3]attack{
			{`{"reason":"a","reason":"b"}`, "reason"},
			{`{"reason":"a","Reason":"b"}`, "Reason"},
			{`{"reason":"a","notify":true}`, "notify"}}},
		{"cancel", "POST", "/v1/admin/join/registrations/" + p.JoinID + "/cancel", adminReq, [3]attack{
			{`{"reason":"a","reason":"b"}`, "reason"},
			{`{"REASON":"a","reason":"b"}`, "REASON"},
			{`{"force":true}`, "force"}}},
		{"release record", "PUT", "/v1/cluster/nodes/" + node + "/release", nodeReq, [3]attack{
			{`{"runningRelease":"9.9.9","runningRelease":"0.0.1","release":{}}`, "runningRelease"},
			{`{"runningRelease":"0.1.0","release":{},"Release":{}}`, "Release"},
			{`{"release":{"os":{"kernel":"6.1","initrd":"x"}}}`, "release.os.initrd"}}},
		{"applied", "PUT", "/v1/cluster/members/" + node + "/applied", nodeReq, [3]attack{
			{`{"generation":1,"generation":99}`, "generation"},
			{`{"generation":1,"Generation":99}`, "Generation"},
			{`{"generation":1,"members":[]}`, "members"}}},
		{"release import", "POST", "/v1/admin/releases", adminReq, [3]attack{
			{`{"path":"/srv/a","path":"/srv/b"}`, "path"},
			{`{"path":"/srv/a","Path":"/srv/b"}`, "Path"},
			{`{"path":"/srv/a","keys":"/tmp"}`, "keys"}}},
		{"registration", "POST", "/v1/join/registrations", joinerReq(f.Joiner(t, nil)), [3]attack{
			{`{"token":"` + token + `","release":"0.1.0","hostname":"h","hostname":"other"}`, "hostname"},
			{`{"token":"` + token + `","release":"0.1.0","hostname":"h","mgmtIP":"192.0.2.70"}`, "mgmtIP"},
			{`{"token":"` + token + `","release":"0.1.0","hostname":"h","facts":{},"role":"postgres"}`, "role"}}},
		{"progress", "POST", "/v1/join/registrations/" + v.JoinID + "/progress", joinerReq(member), [3]attack{
			{`{"phase":"installing","phase":"done"}`, "phase"},
			{`{"phase":"installing","Phase":"done"}`, "Phase"},
			{`{"phase":"installing","percent":50}`, "percent"}}},
	}

	auditLen := func() int {
		var out struct{ Events []json.RawMessage }
		op.Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &out)
		return len(out.Events)
	}
	before := auditLen()
	for _, rt := range routes {
		for i, a := range rt.attacks {
			kind := [3]string{"duplicate key", "case-variant key", "unknown key"}[i]
			t.Run(rt.name+"/"+kind, func(t *testing.T) {
				e := rt.send(rt.method, rt.url, json.RawMessage(a.body))
				var paths []string
				for _, fe := range e.Fields {
					paths = append(paths, fe.Field)
				}
				if e.Code != apierr.InvalidInput || !slices.Contains(paths, a.path) {
					t.Errorf("%s %s %s: %s %q fields %v, want INVALID_INPUT naming %q", rt.method, rt.url, a.body, e.Code, e.Message, paths, a.path)
				}
			})
		}
	}
	if after := auditLen(); after != before {
		t.Errorf("refused requests wrote %d audit events", after-before)
	}
	// The pending registration is still pending: approve, reject and
	// cancel bodies were refused before anything was done.
	var pv struct{ State string }
	pending.Must(t, "GET", "/v1/join/registrations/"+p.JoinID, nil, 200, &pv)
	if pv.State != "pending" {
		t.Errorf("the attacked registration is %s, want pending", pv.State)
	}
}

// deliveredJoin registers a joiner on token, approves it and fetches its
// delivery: it returns the joiner, its view, its node id and a client
// presenting its node leaf.
func deliveredJoin(t *testing.T, f *stratumtest.Founder, token, mgmt string) (*stratumtest.Client, wire.JoinerView, string, *stratumtest.Client) {
	t.Helper()
	j := f.Joiner(t, nil)
	v, _ := register(t, j, token, "0.1.0", mgmt, 201)
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+v.JoinID+"/approve", map[string]any{}, 200, nil)
	var d struct {
		Delivery struct {
			Bundle struct{ NodeCert, NodeKey, CABundle string }
		}
	}
	j.Must(t, "GET", "/v1/join/registrations/"+v.JoinID, nil, 200, &d)
	b := d.Delivery.Bundle
	node := checkLeaf(t, b.CABundle, b.NodeCert, b.NodeKey, mgmt)
	pair, _ := tls.X509KeyPair([]byte(b.NodeCert), []byte(b.NodeKey))
	return j, v, node, f.Node(t, pair)
}
