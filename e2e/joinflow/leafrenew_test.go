package joinflow

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
	old := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.Pool, Certificates: []tls.Certificate{pair}}}}
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
