package labtest

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	"stratum/wire"
)

// Enrollment is the inventory of expected machines the lab's founder
// holds (SPEC: zero-touch enrollment): the rack's hosts, each recognised
// by its TPM's EK certificate (by its registration key's fingerprint, the
// weaker match, on a lab without TPMs) and given its full assignment. The
// founder approves a host's join by itself once the host proves its TPM;
// nothing in the harness approves anything. A held host is left out of
// the document until Let puts it in: its join waits for a person until
// then (its TPM proved), and is approved when the document names it.
type Enrollment struct {
	lab  *Lab
	role string

	mu       sync.Mutex
	expected []*Host // the document's machines, in order
}

// Inventory is hosts as the inventory of expected machines the founder
// takes (wire.Inventory): each recognised by its EK certificate's SHA-256
// when it has a TPM, else by its registration key's fingerprint, with its
// node id, role, host name and address.
func (l *Lab) Inventory(role string, hosts ...*Host) wire.Inventory {
	inv := wire.Inventory{Machines: []wire.InventoryEntry{}}
	for _, h := range hosts {
		inv.Machines = append(inv.Machines, wire.InventoryEntry{
			Match:  h.inventoryMatch(),
			NodeID: h.NodeID, Role: role, Hostname: h.Name, MgmtIP: h.IP.String(),
			Networks: map[string]wire.Network{}, Labels: map[string]string{},
		})
	}
	return inv
}

// inventoryMatch is how the founder recognises h: its TPM, else its key.
func (h *Host) inventoryMatch() wire.InventoryMatch {
	if h.EKCertSHA256 != "" {
		return wire.InventoryMatch{EKCertSHA256: h.EKCertSHA256}
	}
	return wire.InventoryMatch{KeyFingerprint: h.KeyFingerprint}
}

// Enroll applies to the lab's founder (PUT /v1/admin/inventory) the
// inventory of hosts with role, but held, which wait until Let. A host
// without a TPM needs its KeyFingerprint (Rack sets it). The founder
// keeps the document in its store, across restarts.
func (l *Lab) Enroll(t testing.TB, role string, hosts, held []*Host) *Enrollment {
	t.Helper()
	e := &Enrollment{lab: l, role: role}
	for _, h := range hosts {
		if h.EKCertSHA256 == "" && h.KeyFingerprint == "" {
			t.Fatalf("labtest: %s has neither an EK certificate nor a key fingerprint yet", h.Name)
		}
		if !slices.Contains(held, h) {
			e.expected = append(e.expected, h)
		}
	}
	e.apply(t)
	return e
}

// Let puts a held host in the inventory: its pending join, its TPM
// proved, is approved now, or once it proves it.
func (e *Enrollment) Let(t testing.TB, h *Host) {
	t.Helper()
	e.mu.Lock()
	if !slices.Contains(e.expected, h) {
		e.expected = append(e.expected, h)
	}
	e.mu.Unlock()
	e.apply(t)
}

// apply replaces the founder's inventory with the expected hosts.
func (e *Enrollment) apply(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	doc := e.lab.Inventory(e.role, e.expected...)
	e.mu.Unlock()
	e.lab.Founder().Operator(t).Must(t, "PUT", "/v1/admin/inventory", doc, http.StatusOK, nil)
}

// JoinID is h's join on the founder (its key's last registration; ""
// when none yet).
func (e *Enrollment) JoinID(t testing.TB, h *Host) string {
	t.Helper()
	return e.lab.Registrations(t)[h.KeyFingerprint].JoinID
}
