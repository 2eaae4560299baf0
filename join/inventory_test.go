package join

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/wire"
)

var (
	ekA = strings.Repeat("ab", 32)
	ekB = strings.Repeat("cd", 32)
)

// inventoryDoc is a document of the entries (JSON objects).
func inventoryDoc(entries ...string) string {
	return `{"machines": [` + strings.Join(entries, ",") + `]}`
}

// entry is a valid entry for machine n with the fields of extra (a JSON
// fragment without braces) replaced, added, or removed when null.
func entry(n int, extra string) string {
	base := map[string]any{
		"match":    map[string]string{"keyFingerprint": keyPin("m" + string(rune('a'+n)))},
		"nodeId":   "n-machine" + string(rune('a'+n)),
		"role":     "worker",
		"mgmtIp":   fmt.Sprintf("192.0.2.%d", 50+n),
		"az":       "az1",
		"networks": map[string]any{"storage": map[string]string{"ip": fmt.Sprintf("10.9.0.%d", 50+n), "interface": "vlan90"}},
		"labels":   map[string]string{"topology.rack": "r2"},
	}
	if extra != "" {
		var over map[string]any
		if err := json.Unmarshal([]byte("{"+extra+"}"), &over); err != nil {
			panic(err)
		}
		for k, v := range over {
			if v == nil {
				delete(base, k)
			} else {
				base[k] = v
			}
		}
	}
	b, _ := json.Marshal(base)
	return string(b)
}

// TestInventoryDocumentRefusals: every problem of a document is named by
// its field, all at once, as INVALID_INPUT.
func TestInventoryDocumentRefusals(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		fields    []string
	}{
		{"no machines", `{}`, []string{"machines"}},
		{"an unknown field", inventoryDoc(entry(0, `"nodeName": "n-abcdefgh"`)), []string{"machines[0].nodeName"}},
		{"a wrong type", inventoryDoc(entry(0, `"mgmtIp": 5`)), []string{"machines[0].mgmtIp"}},
		{"no match", inventoryDoc(entry(0, `"match": {}`)), []string{"machines[0].match"}},
		{"two match kinds", inventoryDoc(entry(0, `"match": {"ekSha256": "`+ekA+`", "keyFingerprint": "`+keyPin("x")+`"}`)), []string{"machines[0].match"}},
		{"a short EK hash", inventoryDoc(entry(0, `"match": {"ekSha256": "abcd"}`)), []string{"machines[0].match.ekSha256"}},
		{"an EK certificate hash not hex", inventoryDoc(entry(0, `"match": {"ekCertSha256": "`+strings.Repeat("zz", 32)+`"}`)), []string{"machines[0].match.ekCertSha256"}},
		{"a key fingerprint without sha256:", inventoryDoc(entry(0, `"match": {"keyFingerprint": "`+ekA+`"}`)), []string{"machines[0].match.keyFingerprint"}},
		{"a key fingerprint too long", inventoryDoc(entry(0, `"match": {"keyFingerprint": "`+keyPin("x")+`00"}`)), []string{"machines[0].match.keyFingerprint"}},
		{"no node id, role or address", inventoryDoc(entry(0, `"nodeId": null, "role": null, "mgmtIp": null`)), []string{"machines[0].nodeId", "machines[0].role", "machines[0].mgmtIp"}},
		{"a bad node id", inventoryDoc(entry(0, `"nodeId": "node-1"`)), []string{"machines[0].nodeId"}},
		{"an unknown role", inventoryDoc(entry(0, `"role": "gpu"`)), []string{"machines[0].role"}},
		{"a CIDR address", inventoryDoc(entry(0, `"mgmtIp": "192.0.2.5/24"`)), []string{"machines[0].mgmtIp"}},
		{"a bad az", inventoryDoc(entry(0, `"az": "AZ 1"`)), []string{"machines[0].az"}},
		{"a bad hostname", inventoryDoc(entry(0, `"hostname": "-x-"`)), []string{"machines[0].hostname"}},
		{"an unknown traffic class", inventoryDoc(entry(0, `"networks": {"backup": {"ip": "10.1.1.1"}}`)), []string{"machines[0].networks.backup"}},
		{"a network without its address", inventoryDoc(entry(0, `"networks": {"storage": {"interface": "vlan90"}}`)), []string{"machines[0].networks.storage.ip"}},
		{"a bad label", inventoryDoc(entry(0, `"labels": {"topology.az": "a"}`)), []string{"machines[0].labels.topology.az"}},
		{"the same node id twice", inventoryDoc(entry(0, ""), entry(1, `"nodeId": "n-machinea"`)), []string{"machines[1].nodeId"}},
		{"the same address twice", inventoryDoc(entry(0, ""), entry(1, `"mgmtIp": "192.0.2.50"`)), []string{"machines[1].mgmtIp"}},
		{"an address of another's network", inventoryDoc(entry(0, ""), entry(1, `"mgmtIp": "10.9.0.50"`)), []string{"machines[1].mgmtIp"}},
		{"the same match twice", inventoryDoc(entry(0, ""), entry(1, `"match": {"keyFingerprint": "sha256:`+strings.ToUpper(keyPin("ma")[7:])+`"}`)), []string{"machines[1].match.keyFingerprint"}},
		{"the same EK twice", inventoryDoc(entry(0, `"match": {"ekSha256": "`+ekA+`"}`), entry(1, `"match": {"ekSha256": "`+strings.ToUpper(ekA)+`"}`)), []string{"machines[1].match.ekSha256"}},
		{"a problem in the third entry", inventoryDoc(entry(0, ""), entry(1, ""), entry(2, `"mgmtIp": "x"`)), []string{"machines[2].mgmtIp"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := c.doc
			_, err := DecodeInventory([]byte(doc))
			wantCode(t, err, apierr.InvalidInput)
			if got := fieldNames(err); !slices.Equal(got, c.fields) {
				t.Errorf("fields %v, want %v (%v)", got, c.fields, err)
			}
			// The same document as YAML names the same fields.
			_, _, err = DecodeInventoryDocument([]byte(doc))
			if got := fieldNames(err); !slices.Equal(got, c.fields) {
				t.Errorf("as YAML: fields %v, want %v (%v)", got, c.fields, err)
			}
		})
	}
}

func TestInventoryDocumentYAML(t *testing.T) {
	doc := `
machines:
  - match: {ekSha256: ` + strings.ToUpper(ekA) + `}
    nodeId: n-rack0001
    role: worker
    mgmtIp: 2001:0db8::1
    az: az1
    networks:
      storage: {ip: 10.9.0.5, interface: vlan90}
    labels: {topology.rack: r2}
`
	inv, body, err := DecodeInventoryDocument([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	e := inv.Machines[0]
	if len(inv.Machines) != 1 || e.Match.EKSHA256 != ekA || e.MgmtIP != "2001:db8::1" || e.Networks["storage"].IP != "10.9.0.5" || e.Labels["topology.rack"] != "r2" {
		t.Fatalf("decoded %+v", inv)
	}
	if _, err := DecodeInventory(body); err != nil {
		t.Fatalf("the JSON it made does not decode: %v", err)
	}
	for name, bad := range map[string]string{
		"an alias":          "a: &x {b: 1}\nmachines: [*x]\n",
		"two documents":     "machines: []\n---\nmachines: []\n",
		"a non-string key":  "machines: []\n1: 2\n",
		"not YAML":          "machines: [\n",
		"a misspelt key":    "machine: []\n",
		"a mapping as list": "machines: {a: 1}\n",
	} {
		if _, _, err := DecodeInventoryDocument([]byte(bad)); apierr.CodeOf(err) != apierr.InvalidInput {
			t.Errorf("%s: %v, want INVALID_INPUT", name, err)
		}
	}
}

// inventoryEntryFor is an entry assigning assignment(n) with nodeID.
func inventoryEntryFor(match wire.InventoryMatch, nodeID, role string, n int) wire.InventoryEntry {
	a := assignment(n)
	return wire.InventoryEntry{Match: match, NodeID: nodeID, Role: role, MgmtIP: a.MgmtIP, AZ: "az1", Networks: a.Networks, Labels: a.Labels}
}

func (e *env) applyInventory(entries ...wire.InventoryEntry) wire.InventoryView {
	e.t.Helper()
	v, err := e.svc.ApplyInventory(e.admin, wire.Inventory{Machines: append([]wire.InventoryEntry{}, entries...)})
	if err != nil {
		e.t.Fatalf("apply inventory: %v", err)
	}
	return v
}

// TestApplyInventoryRefusesTakenAddresses: an entry whose address or node
// id a member or an approved join holds (not its own node) is refused at
// import with the field named, and the refusal changes nothing.
func TestApplyInventoryRefusesTakenAddresses(t *testing.T) {
	bao := newFakeBao()
	bao.root = false
	e := newEnv(t, func(c *Config) { c.OpenBao = bao })
	_, member := e.joinFully("a", 1)
	queued := e.pending("q")
	qa := assignment(2)
	qa.NodeID = "n-queued01"
	e.approve(queued.JoinID, qa) // q takes the slot; w waits in the queue
	waiting := e.pending("w")
	wa := assignment(3)
	wa.NodeID = "n-waiting1"
	e.approve(waiting.JoinID, wa)

	before := e.applyInventory(inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekB}, "n-before01", "worker", 9))
	audits := e.auditCount()
	for _, c := range []struct {
		name   string
		entry  wire.InventoryEntry
		code   apierr.Code
		fields []string
	}{
		{"a member's address", inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, "n-other001", "worker", 1), apierr.Conflict, []string{"machines[1].mgmtIp", "machines[1].networks.storage.ip"}},
		{"a queued join's address", inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, "n-other001", "worker", 3), apierr.Conflict, []string{"machines[1].mgmtIp", "machines[1].networks.storage.ip"}},
		{"a member's node id at another address", inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, member, "worker", 5), apierr.Conflict, []string{"machines[1].nodeId"}},
		{"a queued join's node id at another address", inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, "n-waiting1", "worker", 5), apierr.Conflict, []string{"machines[1].nodeId"}},
		{"a VIP", func() wire.InventoryEntry {
			x := inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, "n-other001", "worker", 5)
			x.MgmtIP = e.id.VIPs.API
			return x
		}(), apierr.InvalidInput, []string{"machines[1].mgmtIp"}},
		{"the founder's address", func() wire.InventoryEntry {
			x := inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, "n-other001", "worker", 5)
			x.MgmtIP = "192.0.2.10"
			return x
		}(), apierr.InvalidInput, []string{"machines[1].mgmtIp"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok := inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekB}, "n-fine0001", "worker", 8)
			_, err := e.svc.ApplyInventory(e.admin, wire.Inventory{Machines: []wire.InventoryEntry{ok, c.entry}})
			wantCode(t, err, c.code)
			if got := fieldNames(err); !slices.Equal(got, c.fields) {
				t.Errorf("fields %v, want %v (%v)", got, c.fields, err)
			}
			after, _ := e.svc.Inventory()
			if len(after.Machines) != 1 || after.Machines[0].NodeID != "n-before01" || e.auditCount() != audits {
				t.Errorf("a refused import changed the inventory: %+v (audit %d -> %d)", after, audits, e.auditCount())
			}
		})
	}
	if len(before.Machines) != 1 || before.Machines[0].State != InventoryExpected || before.UpdatedBy != e.admin.Subject {
		t.Fatalf("the first import: %+v", before)
	}
	// An entry for a member's own node at its own address is its own:
	// accepted, and listed as a member with its join.
	m, _ := e.member(member)
	own := inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, member, "control-plane", 1)
	own.AZ = m.AZ
	v := e.applyInventory(own)
	if len(v.Machines) != 1 || v.Machines[0].State != InventoryMember || v.Machines[0].JoinID != m.JoinID {
		t.Fatalf("the member's own entry: %+v", v)
	}
	// The queued joins' node ids show as joining.
	v = e.applyInventory(inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, "n-waiting1", "worker", 3))
	if v.Machines[0].State != InventoryJoining || v.Machines[0].JoinID != waiting.JoinID {
		t.Fatalf("the queued join's entry: %+v", v)
	}
	// An empty list clears it.
	if v := e.applyInventory(); len(v.Machines) != 0 {
		t.Fatalf("cleared: %+v", v)
	}
}
