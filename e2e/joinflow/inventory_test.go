package joinflow

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
	"stratum/joiner"
	"stratum/wire"
)

// operatorEnv is what a CLI command needs to reach f as its operator.
func operatorEnv(t *testing.T, f *stratumtest.Founder) []string {
	return []string{"STRATUM_API=https://" + f.API, "STRATUM_CA_FILE=" + filepath.Join(f.Dir, "ca.pem"), "STRATUM_TOKEN=" + f.Operator(t).Token}
}

// TestInventory_ZeroTouchJoinByKey: an inventory entry naming a machine's
// registration key (the key imaged onto it beforehand) makes a real
// `stratum join` join with no person approving, with the entry's
// assignment; the approval is audited as the inventory's with its
// evidence. An entry for an address the joined node now holds is refused
// at import with the field named, and the refusal changes nothing.
func TestInventory_ZeroTouchJoinByKey(t *testing.T) {
	work := t.TempDir()
	f := stratumtest.Serve(t, filepath.Join(work, "founder"), "--dev")
	env := operatorEnv(t, f)

	stateDir := filepath.Join(work, "rack-a-state")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	id, err := joiner.LoadOrCreateIdentity(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	doc := `machines:
  - match: {keyFingerprint: ` + id.Fingerprint + `}
    nodeId: n-rack0001
    role: worker
    hostname: rack-a
    mgmtIp: 127.0.0.2
    az: az1
    labels: {example.com/slot: "7"}
`
	r := stratumtest.RunInput(t, env, doc, "inventory", "apply", "-f", "-")
	if r.Code != 0 || !strings.Contains(r.Stdout, "inventory applied: 1 machine") {
		t.Fatalf("stratum inventory apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = stratumtest.Run(t, env, "inventory", "list")
	if r.Code != 0 || !strings.Contains(r.Stdout, "n-rack0001") || !strings.Contains(r.Stdout, "expected") {
		t.Fatalf("stratum inventory list before the join: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	root := filepath.Join(work, "rack-a")
	var tok struct{ Token string }
	f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker"}, 201, &tok)
	cmd := exec.Command(stratumtest.Binary(t), "join", "--founder", f.Join, "--token", tok.Token, "--ca-pin", f.Pin, "--release", "0.1.0",
		"--state-dir", stateDir, "--root", root, "--hostname", "rack-a", "--mgmt-ip", "127.0.0.2",
		"--tpm", filepath.Join(work, "no-tpm"), "--insecure-store-unseal-key")
	cmd.Env = stratumtest.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stratum join: %v\n%s\nfounder:\n%s", err, out.String(), f.OutputTail(40))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("stratum join did not join without a person:\n%s", out.String())
	}
	if got := stratumtest.NodeID(t, root); got != "n-rack0001" {
		t.Fatalf("the joined node is %s, want the entry's n-rack0001", got)
	}

	var list struct{ Registrations []wire.OperatorView }
	f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations", nil, 200, &list)
	if len(list.Registrations) != 1 {
		t.Fatalf("registrations: %+v", list.Registrations)
	}
	reg := list.Registrations[0]
	if reg.State != wire.StateJoined || reg.ApprovedBy != "inventory" || reg.KeyFingerprint != id.Fingerprint || reg.Assignment == nil ||
		reg.Assignment.AZ != "az1" || reg.Assignment.Labels["example.com/slot"] != "7" {
		t.Fatalf("the registration: %+v", reg)
	}
	var audit struct{ Events []wire.AuditEvent }
	f.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &audit)
	approved := false
	for _, e := range audit.Events {
		if e.Kind == "join.approved" && e.Subject == reg.JoinID {
			approved = e.Actor == "inventory" && e.Data["match"] == "keyFingerprint" && e.Data["matchHash"] == id.Fingerprint && e.Data["inventoryNodeId"] == "n-rack0001"
			if !approved {
				raw, _ := json.Marshal(e)
				t.Errorf("audit of the approval: %s", raw)
			}
		}
	}
	if !approved {
		t.Error("no join.approved event by the inventory")
	}
	r = stratumtest.Run(t, env, "inventory", "list", "-o", "json")
	var inv wire.InventoryView
	if err := json.Unmarshal([]byte(r.Stdout), &inv); err != nil || r.Code != 0 {
		t.Fatalf("inventory list -o json: %v\n%s%s", err, r.Stdout, r.Stderr)
	}
	if len(inv.Machines) != 1 || inv.Machines[0].State != "member" || inv.Machines[0].JoinID != reg.JoinID {
		t.Fatalf("inventory after the join: %+v", inv.Machines)
	}

	// An entry for the address the joined node holds: refused at import,
	// the field named, nothing changed.
	taken := filepath.Join(work, "taken.json")
	takenDoc := `{"machines": [
	  {"match": {"ekSha256": "` + strings.Repeat("cd", 32) + `"}, "nodeId": "n-rack0003", "role": "worker", "mgmtIp": "127.0.0.3"},
	  {"match": {"ekSha256": "` + strings.Repeat("ab", 32) + `"}, "nodeId": "n-rack0002", "role": "worker", "mgmtIp": "127.0.0.2"}]}`
	if err := os.WriteFile(taken, []byte(takenDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	r = stratumtest.Run(t, env, "inventory", "apply", "-f", taken)
	if r.Code == 0 || !strings.Contains(r.Stderr, "machines[1].mgmtIp") || !strings.Contains(r.Stderr, "member n-rack0001") || strings.Contains(r.Stderr, "machines[0]") {
		t.Fatalf("an entry for a taken address: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var after wire.InventoryView
	f.Operator(t).Must(t, "GET", "/v1/admin/inventory", nil, 200, &after)
	if len(after.Machines) != 1 || !after.UpdatedAt.Equal(inv.UpdatedAt) {
		t.Fatalf("a refused import changed the inventory: %+v", after)
	}
	// The API answers the same envelope.
	e := f.Operator(t).Must(t, "PUT", "/v1/admin/inventory", json.RawMessage(takenDoc), 409, nil)
	if len(e.Fields) != 1 || e.Fields[0].Field != "machines[1].mgmtIp" {
		t.Fatalf("PUT /v1/admin/inventory with a taken address: %+v", e)
	}

	// A key the inventory does not name, with a valid token: it waits for
	// a person, and the operator sees why.
	stranger, ans := register(t, f, joinToken(t, f, 1), "0.1.0", "127.0.0.5")
	ans.want(t, 201, "")
	if v := operatorView(t, f, stranger.joinID); v.State != wire.StatePending || !strings.Contains(v.AutoApproval, "no inventory entry matches") {
		t.Fatalf("a key not in the inventory: %+v", v)
	}
	r = stratumtest.Run(t, env, "joins", "list")
	if r.Code != 0 || !strings.Contains(r.Stdout, "pending (no inventory entry matches its key") {
		t.Fatalf("joins list does not say why the stranger waits: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestTrust_MembersReplace: `stratum members replace` on the real
// binary: refusals change nothing; a replacement removes the old member
// in the transaction that approves the new machine with its node id and
// address, and from then on the old node's leaf gets 401.
func TestTrust_MembersReplace(t *testing.T) {
	f := trustFounder(t, "0.1.0")
	env := operatorEnv(t, f)
	a := joined(t, f, "0.1.0", "192.0.2.21")
	a.record(t, "0.1.0").want(t, 204, "")
	n, reg := register(t, f, joinToken(t, f, 1), "0.1.0", "192.0.2.99")
	reg.want(t, 201, "")
	g := generation(t, f)

	var founder struct{ Node string }
	f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &founder)
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"the founder", []string{founder.Node, "--join", n.joinID}, "founder"},
		{"an unknown node", []string{"n-nosuchnd", "--join", n.joinID}, "no member"},
		{"a join that is not pending", []string{a.nodeID, "--join", a.joinID}, "already joined"},
	} {
		r := stratumtest.Run(t, env, append([]string{"members", "replace", "--reason", "swap"}, c.args...)...)
		if r.Code == 0 || !strings.Contains(r.Stderr, c.says) {
			t.Errorf("%s: exit %d\n%s%s", c.name, r.Code, r.Stdout, r.Stderr)
		}
		if generation(t, f) != g || operatorView(t, f, n.joinID).State != wire.StatePending {
			t.Errorf("%s: a refused replacement changed the cluster", c.name)
		}
	}
	a.record(t, "0.1.0").want(t, 204, "")

	r := stratumtest.Run(t, env, "members", "replace", a.nodeID, "--join", n.joinID, "--reason", "mainboard swapped")
	if r.Code != 0 || !strings.Contains(r.Stdout, "replaced "+a.nodeID+" by "+n.joinID) {
		t.Fatalf("stratum members replace: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	v := operatorView(t, f, n.joinID)
	if v.Assignment == nil || v.Assignment.NodeID != a.nodeID || v.Assignment.MgmtIP != "192.0.2.21" {
		t.Fatalf("the new machine: %+v", v)
	}
	// The old leaf grants nothing.
	send(t, a.node, "GET", "https://"+f.API+"/v1/cluster/members?wait=0", "", nil).want(t, 401, "UNAUTHENTICATED")
	a.record(t, "0.1.0").want(t, 401, "UNAUTHENTICATED")

	// The new machine takes its delivery: a leaf for the old address and
	// node id.
	var jv struct {
		State    string
		Delivery struct{ Bundle struct{ NodeCert string } }
	}
	ans := send(t, n.joiner, "GET", "https://"+f.Join+"/v1/join/registrations/"+n.joinID, "", nil).want(t, 200, "")
	_ = json.Unmarshal(ans.raw, &jv)
	if jv.State != wire.StateDelivering || !strings.Contains(jv.Delivery.Bundle.NodeCert, "BEGIN CERTIFICATE") {
		t.Fatalf("the new machine's view: %s", ans.raw)
	}

	var audit struct{ Events []wire.AuditEvent }
	f.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &audit)
	found := false
	for _, e := range audit.Events {
		if e.Kind == "cluster.member.replaced" && e.Subject == a.nodeID {
			found = e.Data["reason"] == "mainboard swapped" && e.Data["joinId"] == n.joinID && e.Data["oldKey"] != "" && e.Data["newKey"] != "" && e.Data["oldKey"] != e.Data["newKey"]
			if !found {
				raw, _ := json.Marshal(e)
				t.Errorf("audit of the replacement: %s", raw)
			}
		}
	}
	if !found {
		t.Error("no cluster.member.replaced event")
	}
}
