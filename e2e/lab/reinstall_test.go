package lab

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"stratum/internal/labtest"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// TestRackReinstall: a machine of the inventory is reinstalled. It joined
// zero-touch; then its disk is wiped (its state dir, so a new registration
// key, and its root with the old leaf) and `stratum join` runs again with
// the same TPM. The founder recognises the TPM, and in one transaction
// removes the old member and approves the new registration with the same
// node id and address, by itself (audited cluster.member.replaced by the
// inventory, the old and new keys named); the new node joins and records
// its release; the old leaf gets 401 on the node endpoints while the new
// one reads the members.
func TestRackReinstall(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Hosts: 1})
	h := lab.Hosts[0]
	f := lab.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	first := lab.Rack(t, labtest.RackOptions{})
	first.WaitJoined(t, time.Minute)
	lab.WaitRecorded(t, lab.Hosts, 30*time.Second)
	oldKey, oldJoin := h.KeyFingerprint, first.Enrollment.JoinID(t, h)
	oldLeaf := readLeaf(t, h)
	oldCert, _ := os.ReadFile(filepath.Join(h.Root, "etc/stratum/secrets/node.crt"))
	if got := nodeStatus(t, f, oldLeaf, "GET", "/v1/cluster/members?wait=0", nil); got != http.StatusOK {
		t.Fatalf("the first install's leaf reads the members: %d, want 200", got)
	}

	// The reinstall: the machine goes down, its disk is wiped, its TPM
	// stays.
	first.Join(h).Agent().Kill()
	reinstalled := time.Now()
	for _, d := range []string{h.State, h.Root} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	second := lab.Rack(t, labtest.RackOptions{})
	if h.KeyFingerprint == oldKey {
		t.Fatal("the wiped machine kept its registration key")
	}
	second.WaitJoined(t, time.Minute)
	lab.WaitRecorded(t, lab.Hosts, 30*time.Second)
	newJoin := second.Enrollment.JoinID(t, h)
	lab.CheckJoined(t, lab.Hosts) // the same node id, at the same address, joined by the new key
	if m := lab.Members(t)[h.NodeID]; !m.JoinedAt.After(reinstalled) {
		t.Errorf("member %s joined at %v, before the reinstall (%v)", h.NodeID, m.JoinedAt, reinstalled)
	}
	if len(lab.Members(t)) != 2 {
		t.Errorf("members %v, want the founder and %s", lab.Members(t), h.NodeID)
	}

	events := lab.Audit(t)
	lab.CheckZeroTouch(t, lab.Hosts, events)
	var replaced []wire.AuditEvent
	for _, e := range events {
		if e.Kind == "cluster.member.replaced" {
			replaced = append(replaced, e)
		}
	}
	if len(replaced) != 1 {
		t.Fatalf("%d cluster.member.replaced events, want 1: %+v", len(replaced), replaced)
	}
	if e := replaced[0]; e.Subject != h.NodeID || e.Actor != "inventory" || e.Data["oldKey"] != oldKey || e.Data["newKey"] != h.KeyFingerprint ||
		e.Data["match"] != "ekCertSha256" || e.Data["joinId"] != newJoin {
		t.Errorf("the replacement's audit: %+v (old join %s key %s, new join %s key %s)", e, oldJoin, oldKey, newJoin, h.KeyFingerprint)
	}

	// The old leaf opens nothing; the new one does.
	newLeaf := readLeaf(t, h)
	if newCert, _ := os.ReadFile(filepath.Join(h.Root, "etc/stratum/secrets/node.crt")); bytes.Equal(newCert, oldCert) {
		t.Fatal("the reinstalled machine got the old leaf")
	}
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/cluster/members?wait=0", nil},
		{"PUT", "/v1/cluster/members/" + h.NodeID + "/applied", map[string]any{"generation": 1}},
	} {
		if got := nodeStatus(t, f, oldLeaf, r.method, r.path, r.body); got != http.StatusUnauthorized {
			t.Errorf("the old leaf: %s %s: %d, want 401", r.method, r.path, got)
		}
	}
	if got := nodeStatus(t, f, newLeaf, "GET", "/v1/cluster/members?wait=0", nil); got != http.StatusOK {
		t.Errorf("the new leaf reads the members: %d, want 200", got)
	}
	second.AgentsRunning(t)
}

// readLeaf is the node leaf the host's delivery wrote.
func readLeaf(t *testing.T, h *labtest.Host) tls.Certificate {
	t.Helper()
	leaf, err := tls.LoadX509KeyPair(filepath.Join(h.Root, "etc/stratum/secrets/node.crt"), filepath.Join(h.Root, "etc/stratum/secrets/node.key"))
	if err != nil {
		t.Fatalf("%s's leaf: %v", h.Name, err)
	}
	return leaf
}

// nodeStatus is the status of a node endpoint asked with leaf.
func nodeStatus(t *testing.T, f *stratumtest.Founder, leaf tls.Certificate, method, path string, body any) int {
	t.Helper()
	status, _, err := f.Node(t, leaf).Do(method, path, body, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return status
}
