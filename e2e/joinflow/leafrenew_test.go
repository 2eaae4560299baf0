package joinflow

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/internal/freeport"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// TestLeafRenewal: the agent renews the node's transport leaf without a
// restart (--leaf-renew-before above its 365 days renews at once): the
// key (0600) and certificate on disk are new, the new leaf chains to the
// cluster CA and names the node, the agent keeps recording and serving
// the prober with it, and once it was used the founder refuses the
// delivered leaf with 401, for every node endpoint.
func TestLeafRenewal(t *testing.T) {
	work := t.TempDir()
	agentPort := freeport.Must(t, "127.0.0.2")
	f := stratumtest.Serve(t, filepath.Join(work, "founder"), "--dev", "--agent-port", strconv.Itoa(agentPort), "--probe-interval", "300ms")
	root := joinNode(t, f, work, "node-a", "127.0.0.2")
	copyFile(t, "/etc/os-release", filepath.Join(root, "etc/os-release"))
	nodeID := stratumtest.NodeID(t, root)
	certPath, keyPath := filepath.Join(root, "etc/stratum/secrets/node.crt"), filepath.Join(root, "etc/stratum/secrets/node.key")
	oldCert, _ := os.ReadFile(certPath)
	oldKey, _ := os.ReadFile(keyPath)
	pair, err := tls.X509KeyPair(oldCert, oldKey)
	if err != nil {
		t.Fatalf("the delivered leaf: %v", err)
	}
	old := f.Node(t, pair).HTTP
	base := "https://" + f.API
	send(t, old, "PUT", base+"/v1/cluster/nodes/"+nodeID+"/release", "", releaseRecord("0.1.0")).want(t, 204, "")

	agent := stratumtest.StartAgent(t, base, root, "--listen", "127.0.0.2:"+strconv.Itoa(agentPort), "--interval", "2s", "--leaf-renew-before", "9000h")
	waitFor(t, 20*time.Second, "the agent renews its leaf\n"+agent.Output(), func() bool {
		return strings.Contains(agent.Output(), "node transport leaf renewed")
	})
	// Once the agent used its new leaf, the delivered one counts no more.
	waitFor(t, 20*time.Second, "the founder refuses the delivered leaf\n"+agent.Output(), func() bool {
		return send(t, old, "GET", base+"/v1/cluster/members?wait=0", "", nil).status == 401
	})
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/cluster/members?wait=0", nil},
		{"PUT", "/v1/cluster/members/" + nodeID + "/applied", map[string]any{"generation": 1}},
		{"PUT", "/v1/cluster/nodes/" + nodeID + "/release", releaseRecord("0.1.0")},
		{"POST", "/v1/cluster/nodes/" + nodeID + "/leaf", map[string]any{"publicKey": "x"}},
	} {
		send(t, old, r.method, base+r.path, "", r.body).want(t, 401, "UNAUTHENTICATED")
	}

	// The files: a new key, 0600, and a new certificate for the node.
	st, err := os.Stat(keyPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key: %v %v, want 0600", st.Mode(), err)
	}
	newKey, _ := os.ReadFile(keyPath)
	newCertPEM, _ := os.ReadFile(certPath)
	if bytes.Equal(newKey, oldKey) || bytes.Equal(newCertPEM, oldCert) {
		t.Fatal("node.key or node.crt is the delivered one")
	}
	cert, err := crypto.ParseCertPEM(newCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(root, "etc/stratum/secrets/ca.pem"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || cert.Subject.CommonName != nodeID {
		t.Fatalf("the renewed leaf: CN %s, %v", cert.Subject.CommonName, err)
	}
	if d := time.Until(cert.NotAfter); d < 364*24*time.Hour {
		t.Errorf("the renewed leaf expires in %v, want 365 days", d)
	}

	// The agent keeps recording, with its new leaf: a change of the
	// node's release reaches the release set.
	if err := os.WriteFile(filepath.Join(root, "etc/stratum/release"), []byte("0.1.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the agent records 0.1.1 after its renewal\n"+agent.Output(), func() bool {
		var set wire.ReleaseSet
		f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &set)
		for _, n := range set.Nodes {
			if n.NodeID == nodeID {
				return n.RunningRelease == "0.1.1"
			}
		}
		return false
	})
	// And the prober still verifies its /startupz.
	waitFor(t, 10*time.Second, "node-a ready after its renewal", func() bool {
		var members wire.MembersView
		f.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
		for _, m := range members.Members {
			if m.NodeID == nodeID {
				return m.BootState == "ready"
			}
		}
		return false
	})

	// Audited: each renewal names the node, its serials and expiry.
	var audit struct{ Events []wire.AuditEvent }
	f.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &audit)
	renewed := 0
	for _, e := range audit.Events {
		if e.Kind == "cluster.node.leaf.renewed" && e.Subject == nodeID && e.Data["newSerial"] != "" && e.Data["notAfter"] != "" {
			renewed++
		}
	}
	if renewed == 0 {
		raw, _ := json.Marshal(audit.Events)
		t.Errorf("no cluster.node.leaf.renewed event for %s: %s", nodeID, raw)
	}
	if strings.Contains(agent.Output(), "renewing the node's transport leaf failed") {
		t.Errorf("a renewal failed:\n%s", agent.Output())
	}
}

// renewal asks for a new leaf for a fresh P-256 key with c's leaf (or
// bearer), for nodeID; on 200 it answers the new leaf as a client.
func renewal(t *testing.T, f *stratumtest.Founder, c *http.Client, bearer, nodeID string, pub any) (answer, *http.Client, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if pub == nil {
		pub = key.Public()
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	a := send(t, c, "POST", "https://"+f.API+"/v1/cluster/nodes/"+nodeID+"/leaf", bearer, map[string]any{"publicKey": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))})
	if a.status != 200 {
		return a, nil, nil
	}
	var out wire.NodeLeaf
	if err := json.Unmarshal(a.raw, &out); err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := crypto.MarshalKeyPEM(key)
	pair, err := tls.X509KeyPair([]byte(out.Certificate), keyPEM)
	if err != nil {
		t.Fatalf("the renewed leaf is not for the key sent: %v", err)
	}
	cert, _ := x509.ParseCertificate(pair.Certificate[0])
	return a, f.Node(t, pair).HTTP, cert
}

// TestTrust_LeafRenewalOnlyForItself: on the real binary, a node's leaf
// renews that node's leaf and nothing else. Another node's leaf gets 403
// (as on every node endpoint), a bearer token 401, a node still
// delivering 403, a removed member 401, a key that is not P-256 400, and
// none of these changes anything: the members' own leaves still count.
// The renewed leaf counts beside the delivered one until its first use;
// then the delivered one gets 401.
func TestTrust_LeafRenewalOnlyForItself(t *testing.T) {
	f := trustFounder(t, "0.1.0")
	a := joined(t, f, "0.1.0", "192.0.2.11")
	b := joined(t, f, "0.1.0", "192.0.2.12")
	a.apply(t)
	c, reg := register(t, f, joinToken(t, f, 1), "0.1.0", "192.0.2.13")
	reg.want(t, 201, "")
	c.deliver(t) // delivering: its leaf does not count yet

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	refusals := []struct {
		name   string
		client *http.Client
		bearer string
		node   string
		pub    any
		status int
		code   string
	}{
		{"a's leaf for b", a.node, "", b.nodeID, nil, 403, "FORBIDDEN"},
		{"an operator's token", f.Client, f.Operator(t).Token, a.nodeID, nil, 401, "UNAUTHENTICATED"},
		{"a node still delivering", c.node, "", c.nodeID, nil, 403, "FORBIDDEN"},
		{"a P-384 key", a.node, "", a.nodeID, p384.Public(), 400, "INVALID_INPUT"},
		{"an Ed25519 key", a.node, "", a.nodeID, ed.Public(), 400, "INVALID_INPUT"},
	}
	for _, r := range refusals {
		before := auditKinds(t, f)
		ans, _, _ := renewal(t, f, r.client, r.bearer, r.node, r.pub)
		if ans.status != r.status || ans.err.Code != r.code {
			t.Errorf("%s: %d %s, want %d %s", r.name, ans.status, ans.raw, r.status, r.code)
		}
		if after := auditKinds(t, f); len(after) != len(before) {
			t.Errorf("%s: the refusal was audited or changed something: %v", r.name, after[len(before):])
		}
	}
	a.record(t, "0.1.0").want(t, 204, "")
	b.record(t, "0.1.0").want(t, 204, "")

	// a renews: both leaves count until the new one is used.
	ans, renewed, cert := renewal(t, f, a.node, "", a.nodeID, nil)
	ans.want(t, 200, "")
	if cert.Subject.CommonName != a.nodeID || len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != "192.0.2.11" || len(cert.URIs) != 0 {
		t.Errorf("the renewed leaf names %s %v %v", cert.Subject.CommonName, cert.IPAddresses, cert.URIs)
	}
	a.record(t, "0.1.0").want(t, 204, "")
	send(t, renewed, "PUT", "https://"+f.API+"/v1/cluster/nodes/"+a.nodeID+"/release", "", releaseRecord("0.1.0")).want(t, 204, "")
	a.record(t, "0.1.0").want(t, 401, "UNAUTHENTICATED")
	send(t, renewed, "GET", "https://"+f.API+"/v1/cluster/members?wait=0", "", nil).want(t, 200, "")
	kinds := strings.Join(auditKinds(t, f), " ")
	if !strings.Contains(kinds, "cluster.node.leaf.renewed") || !strings.Contains(kinds, "cluster.node.leaf.promoted") {
		t.Errorf("audit kinds: %s", kinds)
	}

	// A removed member's leaf renews nothing.
	f.Operator(t).Must(t, "POST", "/v1/admin/cluster/members/"+b.nodeID+"/remove", map[string]any{"reason": "hardware gone"}, 200, nil)
	renewalAns, _, _ := renewal(t, f, b.node, "", b.nodeID, nil)
	renewalAns.want(t, 401, "UNAUTHENTICATED")
}
