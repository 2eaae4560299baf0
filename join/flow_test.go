package join

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/store"
	"stratum/wire"
)

func TestFullFlow(t *testing.T) {
	e := newEnv(t)
	reg := e.pending("a")

	// A waiter holding with lastState=pending answers within milliseconds
	// of the approval, long before its 60 s are up.
	type answer struct {
		v       wire.JoinerView
		err     error
		elapsed time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		start := time.Now()
		v, err := e.svc.Wait(context.Background(), keyPin("a"), reg.JoinID, wire.StatePending, 60*time.Second)
		done <- answer{v, err, time.Since(start)}
	}()
	waitFor(t, func() bool { return e.svc.Hub().Waiters() == 1 })
	a := assignment(1)
	approved := e.approve(reg.JoinID, a)
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.elapsed > 2*time.Second {
		t.Errorf("waiter answered after %v", got.elapsed)
	}
	// The slot was free, so the approval gave it the turn at once.
	if got.v.State != wire.StateDelivering || got.v.Delivery == nil || approved.State != wire.StateDelivering {
		t.Fatalf("after approval: %s / %s", got.v.State, approved.State)
	}
	nodeID := approved.Assignment.NodeID
	if !cluster.ValidNodeID(nodeID) {
		t.Errorf("generated node id %q", nodeID)
	}
	b := got.v.Delivery.Bundle
	checkLeaf(t, b, nodeID, a.MgmtIP)
	checkBundle(t, e, b, nodeID)
	checkNodeYAML(t, got.v.Delivery.NodeYAML, nodeID, e.id.ClusterID)

	m, found := e.member(nodeID)
	if !found || m.State != cluster.MemberJoining || m.Generation != b.Generation || b.Generation != 2 {
		t.Fatalf("member %+v found=%v, bundle generation %d", m, found, b.Generation)
	}

	// Another key learns nothing.
	_, err := e.svc.View(keyPin("b"), reg.JoinID)
	other := wantCode(t, err, apierr.NotFound)
	_, err = e.svc.View(keyPin("a"), "j-unknown1")
	unknown := wantCode(t, err, apierr.NotFound)
	if strings.Replace(other.Message, reg.JoinID, "ID", 1) != strings.Replace(unknown.Message, "j-unknown1", "ID", 1) {
		t.Errorf("another key's 404 %q differs from an unknown id's %q", other.Message, unknown.Message)
	}
	_, err = e.svc.Progress(keyPin("b"), reg.JoinID, wire.ProgressRequest{Phase: wire.PhaseInstalling})
	wantCode(t, err, apierr.NotFound)

	if v := e.progress("a", reg.JoinID, wire.PhaseInstalling); v.State != wire.StateInstalling || v.Delivery == nil {
		t.Fatalf("installing: %s delivery=%v", v.State, v.Delivery != nil)
	}
	v := e.progress("a", reg.JoinID, wire.PhaseDone)
	if v.State != wire.StateJoined || v.Delivery != nil {
		t.Fatalf("done: %s delivery=%v", v.State, v.Delivery != nil)
	}
	if m, _ := e.member(nodeID); m.State != cluster.MemberActive || m.AppliedGeneration != 2 {
		t.Errorf("member after joined %+v", m)
	}
	// A repeated done (lost answer) is answered, not refused.
	if v := e.progress("a", reg.JoinID, wire.PhaseDone); v.State != wire.StateJoined {
		t.Errorf("repeated done: %s", v.State)
	}
	_ = e.db.View(func(tx *store.Tx) error {
		if bucketDeliveries.Get(tx, reg.JoinID) != nil {
			t.Error("the sealed delivery outlived the join")
		}
		return nil
	})
	members, err := e.svc.Members()
	if err != nil || members.Generation != 2 || len(members.Members) != 2 || members.Members[1].NodeID != nodeID {
		t.Errorf("members %+v %v", members, err)
	}
	e.auditCount()
}

func checkLeaf(t *testing.T, b wire.Bundle, nodeID, mgmtIP string) {
	t.Helper()
	cert, err := crypto.ParseCertPEM([]byte(b.NodeCert))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(b.CABundle)) {
		t.Fatal("caBundle holds no certificate")
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: nodeID, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("nodeCert does not verify for %v: %v", usage, err)
		}
	}
	if cert.Subject.CommonName != nodeID {
		t.Errorf("CN %q", cert.Subject.CommonName)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP(mgmtIP)) {
		t.Errorf("IP SANs %v", cert.IPAddresses)
	}
	if d := cert.NotAfter.Sub(cert.NotBefore); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("validity %v", d)
	}
	key, err := crypto.ParseKeyPEM([]byte(b.NodeKey))
	if err != nil {
		t.Fatal(err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || !ec.PublicKey.Equal(cert.PublicKey) {
		t.Error("nodeKey does not match nodeCert")
	}
}

func checkBundle(t *testing.T, e *env, b wire.Bundle, nodeID string) {
	t.Helper()
	if b.ClusterID != e.id.ClusterID || b.Role != "control-plane" || b.ParentDomain != "stratum.example.com" || b.Region != "lab-1" {
		t.Errorf("identity fields %+v", b)
	}
	if len(b.Nodes) != 2 || b.Nodes[0].NodeID != "n-founder1" || b.Nodes[1].NodeID != nodeID {
		t.Fatalf("nodes %+v", b.Nodes)
	}
	if b.Nodes[1].Networks["storage"].IP != "10.9.0.21" || b.Nodes[1].Labels["topology.rack"] != "r2" {
		t.Errorf("this node in nodes %+v", b.Nodes[1])
	}
	if b.PostgresPassword != e.sec.PostgresPassword || b.AdminPassword != e.sec.AdminPassword ||
		b.AxdnsdEncryptionKey != e.sec.AxdnsdEncryptionKey || b.AdminEmail != "admin@cloud.internal" {
		t.Error("cluster secrets differ from the store's")
	}
	raw, _ := json.Marshal(b)
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields)
	for _, k := range []string{"clusterId", "role", "nodes", "parentDomain", "region", "dnsUpstreamServers", "caBundle", "nodeCert", "nodeKey",
		"postgresPassword", "adminEmail", "adminPassword", "axdnsdEncryptionKey", "openBaoUnsealKey", "generation", "vips"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("bundle lacks %s", k)
		}
	}
	// No OpenBao is configured: neither of its tokens (SPEC 19).
	for _, k := range []string{"openBaoToken", "openBaoNodeToken"} {
		if _, ok := fields[k]; ok {
			t.Errorf("bundle carries %s", k)
		}
	}
	if string(fields["vips"]) != `{"api":"192.0.2.240","postgres":"192.0.2.241","openBao":"192.0.2.242"}` {
		t.Errorf("vips %s", fields["vips"])
	}
	var nodes []map[string]json.RawMessage
	_ = json.Unmarshal(fields["nodes"], &nodes)
	for _, k := range []string{"bootState", "bootPhase", "bootPhaseMs", "lastBootMs"} {
		if _, ok := nodes[0][k]; ok {
			t.Errorf("nodes carry %s without a prober", k)
		}
	}
}

func checkNodeYAML(t *testing.T, text, nodeID, clusterID string) {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"nodeId": nodeID, "clusterId": clusterID, "role": "control-plane", "az": "",
		"mgmt":         map[string]any{"address": "192.0.2.21"},
		"networks":     map[string]any{"storage": map[string]any{"ip": "10.9.0.21", "interface": "vlan90"}},
		"labels":       map[string]any{"topology.rack": "r2"},
		"parentDomain": "stratum.example.com", "region": "lab-1",
		"dns": map[string]any{"upstream_servers": []any{"192.0.2.53"}},
	}
	a, _ := json.Marshal(doc)
	b, _ := json.Marshal(want)
	if !bytes.Equal(a, b) {
		t.Errorf("node.yaml\n got %s\nwant %s", a, b)
	}
}

func TestPostgresBundle(t *testing.T) {
	e := newEnv(t)
	v, _, err := e.register("pg", e.token("postgres", 1), clusterRelease, false)
	if err != nil {
		t.Fatal(err)
	}
	e.approve(v.JoinID, assignment(1))
	b := e.view("pg", v.JoinID).Delivery.Bundle
	if b.Role != "postgres" || b.AdminPassword != "" || b.OpenBaoToken != "" || b.OpenBaoUnsealKey != nil || b.AxdnsdEncryptionKey != "" || b.AdminEmail != "" || b.PostgresPassword == "" {
		t.Errorf("postgres bundle role=%s admin=%q bao=%q unseal=%v", b.Role, b.AdminPassword, b.OpenBaoToken, b.OpenBaoUnsealKey)
	}
}

// The delivered secrets exist in the file only sealed.
func TestSecretsNotInStoreFile(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	e.approve(v.JoinID, assignment(1))
	b := e.view("a", v.JoinID).Delivery.Bundle
	blk, _ := pem.Decode([]byte(b.NodeKey))
	if blk == nil {
		t.Fatal("nodeKey is not PEM")
	}
	body := strings.Join(strings.Split(strings.TrimSpace(b.NodeKey), "\n")[1:2], "")
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(e.path)
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string][]byte{
		"postgres password": []byte(b.PostgresPassword),
		"admin password":    []byte(b.AdminPassword),
		"axdnsd key":        []byte(b.AxdnsdEncryptionKey),
		"node key PEM":      []byte(b.NodeKey),
		"node key base64":   []byte(body),
		"node key DER":      blk.Bytes,
	} {
		if len(secret) < 8 {
			t.Fatalf("%s is too short to search for", name)
		}
		if bytes.Contains(file, secret) {
			t.Errorf("the %s is in stratum.db in plaintext", name)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
