package founder

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"stratum/wire"
	"strconv"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/internal/stratumtest"
)

// joinToken creates a join token for role good for uses registrations,
// as the operator op, and checks the join command it answers.
func joinToken(t *testing.T, op *stratumtest.Client, role string, uses int) string {
	t.Helper()
	var out wire.JoinToken
	op.Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": role, "ttl": "1h", "uses": uses}, 201, &out)
	if !strings.Contains(out.JoinCommand, out.Token) || !strings.Contains(out.JoinCommand, "--ca-pin sha256:") {
		t.Fatalf("joinCommand %q lacks the token or the CA pin", out.JoinCommand)
	}
	return out.Token
}

func register(t *testing.T, j *stratumtest.Client, token, release, mgmt string, want int) (wire.JoinerView, *apierr.Error) {
	t.Helper()
	var v wire.JoinerView
	e := j.Must(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": release, "hostname": "lab-" + mgmt, "mgmtIp": mgmt}, want, &v)
	return v, e
}

// TestJoinEndToEnd walks one join over real TLS: token, key-pinned
// registration, a long-poll woken by the approval, the delivery, the
// progress reports and membership.
func TestJoinEndToEnd(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	token := joinToken(t, op, "control-plane", 1)
	j := f.Joiner(t, nil)
	v, _ := register(t, j, token, "0.1.0", "192.0.2.12", 201)
	if v.State != wire.StatePending {
		t.Fatalf("state %q, want pending", v.State)
	}
	path := "/v1/join/registrations/" + v.JoinID

	// Another key learns nothing: 404, exactly as for an unknown id.
	other := f.Joiner(t, nil)
	e1 := other.Must(t, "GET", path, nil, 404, nil)
	e2 := other.Must(t, "GET", "/v1/join/registrations/j-00000000", nil, 404, nil)
	if e1.Code != apierr.NotFound || e1.Message == "" || strings.Replace(e1.Message, v.JoinID, "j-00000000", 1) != e2.Message {
		t.Fatalf("another key's 404 differs from an unknown id's: %q vs %q", e1.Message, e2.Message)
	}

	// The same key registering again gets its registration back (200).
	again, _ := register(t, j, token, "0.1.0", "192.0.2.12", 200)
	if again.JoinID != v.JoinID {
		t.Fatalf("re-registration made %s, want %s", again.JoinID, v.JoinID)
	}

	type polled struct {
		v       wire.JoinerView
		elapsed time.Duration
	}
	got := make(chan polled, 1)
	go func() {
		start := time.Now()
		var pv wire.JoinerView
		j.Must(t, "GET", path+"?wait=60&state=pending", nil, 200, &pv)
		got <- polled{pv, time.Since(start)}
	}()
	time.Sleep(300 * time.Millisecond)
	op.Must(t, "POST", "/v1/admin/join/registrations/"+v.JoinID+"/approve", map[string]any{}, 200, nil)
	var p polled
	select {
	case p = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll was not woken by the approval")
	}
	if p.elapsed > 5*time.Second {
		t.Fatalf("long-poll answered after %v: the approval did not wake it", p.elapsed)
	}
	if p.v.State != wire.StateDelivering || p.v.Delivery == nil {
		t.Fatalf("after approval: state %q delivery %v, want delivering with a delivery", p.v.State, p.v.Delivery != nil)
	}
	b := p.v.Delivery.Bundle
	nodeID := checkLeaf(t, b.CABundle, b.NodeCert, b.NodeKey, "192.0.2.12")
	if !strings.Contains(p.v.Delivery.NodeYAML, "nodeId: "+nodeID) {
		t.Fatalf("node.yaml does not name %s:\n%s", nodeID, p.v.Delivery.NodeYAML)
	}
	if b.PostgresPassword == "" || b.AdminPassword == "" || len(b.AxdnsdEncryptionKey) != 64 || b.DNSUpstreamServers == nil {
		t.Fatalf("bundle misses cluster values: %+v", b)
	}

	var iv wire.JoinerView
	j.Must(t, "POST", path+"/progress", map[string]string{"phase": "installing"}, 200, &iv)
	if iv.State != wire.StateInstalling || iv.Delivery == nil {
		t.Fatalf("after installing: %q, delivery %v", iv.State, iv.Delivery != nil)
	}
	j.Must(t, "POST", path+"/progress", map[string]string{"phase": "done"}, 200, nil)
	var fv wire.JoinerView
	j.Must(t, "GET", path, nil, 200, &fv)
	if fv.State != wire.StateJoined || fv.Delivery != nil {
		t.Fatalf("after done: state %q, delivery present %v; want joined without delivery", fv.State, fv.Delivery != nil)
	}
	var members wire.MembersView
	op.Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
	if len(members.Members) != 2 || members.Members[1].NodeID != nodeID || members.Members[1].State != "active" {
		t.Fatalf("members: %+v", members)
	}

	// The used-up token, a revoked one: one code for all.
	_, e := register(t, f.Joiner(t, nil), token, "0.1.0", "192.0.2.13", 401)
	if e.Code != apierr.JoinTokenInvalid {
		t.Fatalf("used-up token: %s", e.Code)
	}
	revoked := joinToken(t, op, "worker", 1)
	id := strings.Split(revoked, ".")[1]
	op.Must(t, "DELETE", "/v1/admin/join/tokens/"+id, nil, 204, nil)
	if _, e := register(t, f.Joiner(t, nil), revoked, "0.1.0", "192.0.2.13", 401); e.Code != apierr.JoinTokenInvalid {
		t.Fatalf("revoked token: %s", e.Code)
	}
	if _, e := register(t, f.Joiner(t, nil), "sjt1.jt-nope.nope", "0.1.0", "192.0.2.13", 401); e.Code != apierr.JoinTokenInvalid {
		t.Fatalf("unknown token: %s", e.Code)
	}

	// Secrets of the delivery never reach the file.
	f.Stop(os.Interrupt, 20*time.Second)
	raw, err := os.ReadFile(DataDir(f.Dir).DB())
	if err != nil {
		t.Fatal(err)
	}
	keyBody := strings.Split(b.NodeKey, "\n")[1]
	if b.OpenBaoToken != "" || b.OpenBaoNodeToken != "" {
		t.Errorf("no OpenBao is configured, yet the bundle carries a token (SPEC 19)")
	}
	for name, secret := range map[string]string{"postgresPassword": b.PostgresPassword, "adminPassword": b.AdminPassword, "nodeKey": keyBody, "axdnsdEncryptionKey": b.AxdnsdEncryptionKey} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("%s appears in stratum.db", name)
		}
	}
}

// checkLeaf verifies the transport leaf against the CA bundle, its names
// and that nodeKey is its key; it returns the node id.
func checkLeaf(t *testing.T, caPEM, certPEM, keyPEM, mgmt string) string {
	t.Helper()
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatalf("nodeCert and nodeKey do not match: %v", err)
	}
	cert, err := crypto.ParseCertPEM([]byte(certPEM))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		t.Fatal("caBundle holds no certificate")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("nodeCert does not verify against caBundle: %v", err)
	}
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != cert.Subject.CommonName || !strings.HasPrefix(cert.Subject.CommonName, "n-") {
		t.Fatalf("leaf names: CN %q DNS %v", cert.Subject.CommonName, cert.DNSNames)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP(mgmt)) {
		t.Fatalf("leaf IPs %v, want %s", cert.IPAddresses, mgmt)
	}
	_ = pair
	return cert.Subject.CommonName
}

func TestJoinRefusals(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	token := joinToken(t, op, "worker", 5)

	// Newer, and older without selfUpgrade: RELEASE_MISMATCH with details,
	// and the token is not used.
	for _, rel := range []string{"0.2.0", "0.0.9"} {
		_, e := register(t, f.Joiner(t, nil), token, rel, "192.0.2.20", 409)
		if e.Code != apierr.ReleaseMismatch || e.Details["joinerRelease"] != rel || e.Details["clusterRelease"] != "0.1.0" || e.Details["reason"] == "" {
			t.Fatalf("release %s: %+v", rel, e)
		}
	}
	var tokens struct{ Tokens []wire.JoinTokenView }
	op.Must(t, "GET", "/v1/admin/join/tokens", nil, 200, &tokens)
	if len(tokens.Tokens) != 1 || tokens.Tokens[0].UsesLeft != 5 {
		t.Fatalf("a refused registration used the token: %+v", tokens.Tokens)
	}

	// An approval with three bad fields lists three fields.
	v, _ := register(t, f.Joiner(t, nil), token, "0.1.0", "192.0.2.21", 201)
	e := op.Must(t, "POST", "/v1/admin/join/registrations/"+v.JoinID+"/approve", map[string]any{
		"nodeId": "bad-id", "mgmtIp": "192.0.2.21/24", "networks": map[string]any{"storagex": map[string]string{"ip": "10.0.0.1"}},
	}, 400, nil)
	if e.Code != apierr.InvalidInput || len(e.Fields) != 3 {
		t.Fatalf("three bad fields: %+v", e)
	}

	// Approving a taken address is refused; approving twice is refused.
	if e := op.Must(t, "POST", "/v1/admin/join/registrations/"+v.JoinID+"/approve", map[string]any{"mgmtIp": "127.0.0.1"}, 409, nil); e.Code != apierr.JoinApprovalRefused {
		t.Fatalf("taken mgmt IP: %+v", e)
	}
	op.Must(t, "POST", "/v1/admin/join/registrations/"+v.JoinID+"/approve", map[string]any{}, 200, nil)
	if e := op.Must(t, "POST", "/v1/admin/join/registrations/"+v.JoinID+"/approve", map[string]any{}, 409, nil); e.Code != apierr.JoinApprovalRefused {
		t.Fatalf("second approval: %+v", e)
	}

	// Bad wait values.
	j := f.Joiner(t, nil)
	w, _ := register(t, j, token, "0.1.0", "192.0.2.22", 201)
	for _, q := range []string{"wait=-1", "wait=abc", "wait=1e3", "wait="} {
		if e := j.Must(t, "GET", "/v1/join/registrations/"+w.JoinID+"?"+q, nil, 400, nil); e.Code != apierr.InvalidInput || e.Fields[0].Field != "wait" {
			t.Fatalf("%s: %+v", q, e)
		}
	}
	// A wait on a state the join is not in answers at once.
	start := time.Now()
	j.Must(t, "GET", "/v1/join/registrations/"+w.JoinID+"?wait=60&state=approved", nil, 200, nil)
	if time.Since(start) > 3*time.Second {
		t.Fatal("a wait on another state held")
	}
}

// TestJoinQueue: two approved joins; the second waits at queue position 1
// until the first is joined, which needs every member's applied report.
func TestJoinQueue(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	token := joinToken(t, op, "worker", 3)
	j1, j2 := f.Joiner(t, nil), f.Joiner(t, nil)
	v1, _ := register(t, j1, token, "0.1.0", "192.0.2.31", 201)
	v2, _ := register(t, j2, token, "0.1.0", "192.0.2.32", 201)
	op.Must(t, "POST", "/v1/admin/join/registrations/"+v1.JoinID+"/approve", map[string]any{}, 200, nil)
	op.Must(t, "POST", "/v1/admin/join/registrations/"+v2.JoinID+"/approve", map[string]any{}, 200, nil)
	var s1, s2 wire.JoinerView
	j1.Must(t, "GET", "/v1/join/registrations/"+v1.JoinID, nil, 200, &s1)
	j2.Must(t, "GET", "/v1/join/registrations/"+v2.JoinID, nil, 200, &s2)
	if s1.State != wire.StateDelivering || s2.State != wire.StateApproved || s2.QueuePosition != 1 {
		t.Fatalf("turns: first %s, second %s at %d", s1.State, s2.State, s2.QueuePosition)
	}
	j1.Must(t, "POST", "/v1/join/registrations/"+v1.JoinID+"/progress", map[string]string{"phase": "installing"}, 200, nil)
	j2.Must(t, "GET", "/v1/join/registrations/"+v2.JoinID, nil, 200, &s2)
	if s2.State != wire.StateApproved || s2.QueuePosition != 1 {
		t.Fatalf("second moved before the first joined: %s", s2.State)
	}
	j1.Must(t, "POST", "/v1/join/registrations/"+v1.JoinID+"/progress", map[string]string{"phase": "done"}, 200, nil)
	j2.Must(t, "GET", "/v1/join/registrations/"+v2.JoinID, nil, 200, &s2)
	if s2.State != wire.StateDelivering {
		t.Fatalf("second is %s after the first joined, want delivering", s2.State)
	}
	j2.Must(t, "POST", "/v1/join/registrations/"+v2.JoinID+"/progress", map[string]string{"phase": "done"}, 200, nil)
	j2.Must(t, "GET", "/v1/join/registrations/"+v2.JoinID, nil, 200, &s2)
	if s2.State != wire.StateInstalling {
		t.Fatalf("second is %s before the first node applied its generation, want installing", s2.State)
	}

	// The first node reports the generation with its transport leaf; a
	// bearer token or another node's leaf is not enough.
	leaf := s1.Delivery.Bundle
	node1 := checkLeaf(t, leaf.CABundle, leaf.NodeCert, leaf.NodeKey, "192.0.2.31")
	pair, _ := tls.X509KeyPair([]byte(leaf.NodeCert), []byte(leaf.NodeKey))
	nodeCli := f.Node(t, pair)
	gen := s2.Delivery.Bundle.Generation
	if e := nodeCli.Must(t, "PUT", "/v1/cluster/members/n-00000000/applied", map[string]uint64{"generation": gen}, 403, nil); e.Code != apierr.Forbidden {
		t.Fatalf("another node's report: %+v", e)
	}
	op.Must(t, "PUT", "/v1/cluster/members/"+node1+"/applied", map[string]uint64{"generation": gen}, 401, nil)
	// The membership long-poll: the node's leaf only, answered at once on
	// another generation, held on its own.
	var mv wire.MembersView
	nodeCli.Must(t, "GET", "/v1/cluster/members?wait=30&generation="+strconv.FormatUint(gen-1, 10), nil, 200, &mv)
	if mv.Generation != gen || len(mv.Members) != 3 {
		t.Fatalf("members for the node: %+v", mv)
	}
	start := time.Now()
	nodeCli.Must(t, "GET", "/v1/cluster/members?wait=1&generation="+strconv.FormatUint(gen, 10), nil, 200, &mv)
	if el := time.Since(start); el < time.Second || mv.Generation != gen {
		t.Fatalf("held %v: %+v", el, mv)
	}
	op.Must(t, "GET", "/v1/cluster/members", nil, 401, nil)
	for _, q := range []string{"generation=-1", "generation=x", "wait=-1", "generation=1e3"} {
		if e := nodeCli.Must(t, "GET", "/v1/cluster/members?"+q, nil, 400, nil); e.Code != apierr.InvalidInput {
			t.Fatalf("%s: %+v", q, e)
		}
	}
	nodeCli.Must(t, "PUT", "/v1/cluster/members/"+node1+"/applied", map[string]uint64{"generation": gen}, 200, nil)
	j2.Must(t, "GET", "/v1/join/registrations/"+v2.JoinID, nil, 200, &s2)
	if s2.State != wire.StateJoined {
		t.Fatalf("second is %s after every member applied, want joined", s2.State)
	}
}
