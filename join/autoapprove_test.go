package join

import (
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

func (e *env) auditOf(kind, subject string) *wire.AuditEvent {
	e.t.Helper()
	evs, err := e.db.AuditEvents(0, 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	var last *wire.AuditEvent
	for i := range evs {
		if evs[i].Kind == kind && evs[i].Subject == subject {
			last = &evs[i]
		}
	}
	return last
}

// registerTPM registers key as a joiner that claims a TPM: nothing is
// matched until its attestation is verified.
func (e *env) registerTPM(key, role string) wire.JoinerView {
	e.t.Helper()
	v, _, err := e.svc.Register(keyPin(key), wire.RegisterRequest{Token: e.token(role, 1), Release: clusterRelease,
		Hostname: "lab-" + key, MgmtIP: "192.0.2.99", Attestation: fixtureClaim(e.t)})
	if err != nil || v.State != wire.StatePending {
		e.t.Fatalf("register %s: %+v %v", key, v, err)
	}
	return v
}

// attested runs autoApprove for joinID as the attestation does once a
// proof is verified, with ev.
func (e *env) attested(joinID string, ev *wire.AttestationView) bool {
	e.t.Helper()
	var approved bool
	err := e.svc.update(func(t *txn) error {
		r, err := t.mustRecord(joinID)
		if err != nil {
			return err
		}
		approved, err = t.autoApprove(&r, ev)
		return err
	})
	if err != nil {
		e.t.Fatalf("autoApprove %s: %v", joinID, err)
	}
	return approved
}

// TestAutoApproveByKeyFingerprint: a registration whose key an entry
// names is approved with the entry's whole assignment, audited with the
// evidence, with no person; others wait with the reason.
func TestAutoApproveByKeyFingerprint(t *testing.T) {
	e := newEnv(t)
	want := inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("a")}, "n-rack0001", "control-plane", 1)
	other := inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("w")}, "n-rack0002", "worker", 2)
	e.applyInventory(want, other)

	v := e.pending0("a")
	op, _ := e.svc.Get(v.JoinID)
	if op.State != wire.StateDelivering || op.ApprovedBy != inventoryActor || op.Assignment == nil ||
		op.Assignment.NodeID != want.NodeID || op.Assignment.MgmtIP != want.MgmtIP || op.Assignment.AZ != "az1" ||
		op.Assignment.Networks["storage"] != want.Networks["storage"] || op.Assignment.Labels["topology.rack"] != "r2" ||
		!strings.Contains(op.AutoApproval, "n-rack0001") {
		t.Fatalf("a matched by its key: %+v", op)
	}
	ev := e.auditOf("join.approved", v.JoinID)
	if ev == nil || ev.Actor != inventoryActor || ev.Data["match"] != "keyFingerprint" || ev.Data["matchHash"] != keyPin("a") || ev.Data["inventoryNodeId"] != want.NodeID {
		t.Fatalf("audit of the automatic approval: %+v", ev)
	}
	inv, _ := e.svc.Inventory()
	if inv.Machines[0].State != InventoryJoining || inv.Machines[0].JoinID != v.JoinID || inv.Machines[1].State != InventoryExpected {
		t.Fatalf("inventory: %+v", inv.Machines)
	}

	// No entry: it waits, and says why.
	b := e.pending0("b")
	op, _ = e.svc.Get(b.JoinID)
	if op.State != wire.StatePending || !strings.Contains(op.AutoApproval, "no inventory entry matches") {
		t.Fatalf("b, not inventoried: %+v", op)
	}
	// Another role: it waits.
	w := e.pending0("w")
	op, _ = e.svc.Get(w.JoinID)
	if op.State != wire.StatePending || !strings.Contains(op.AutoApproval, "role worker") {
		t.Fatalf("w with a control-plane token: %+v", op)
	}
	// A person still approves it, and the reason goes.
	op = e.approve(w.JoinID, assignment(5))
	if op.AutoApproval != "" || op.ApprovedBy != e.admin.Subject {
		t.Fatalf("approved by a person: %+v", op)
	}
}

// pending0 registers key with a control-plane token and answers its view,
// whatever state the inventory put it in.
func (e *env) pending0(key string) wire.JoinerView {
	e.t.Helper()
	v, created, err := e.register(key, e.token("control-plane", 1), clusterRelease, false)
	if err != nil || !created {
		e.t.Fatalf("register %s: %+v %v", key, v, err)
	}
	return v
}

// TestAutoApproveTakenEntry: an entry whose node id an approved join
// holds is taken: a second match waits.
func TestAutoApproveTakenEntry(t *testing.T) {
	e := newEnv(t)
	x := e.pending("x")
	xa := assignment(1)
	xa.NodeID = "n-rack0001"
	e.approve(x.JoinID, xa)
	y := e.pending("y")
	ya := assignment(2)
	ya.NodeID = "n-rack0002"
	e.approve(y.JoinID, ya) // queued: it holds n-rack0002
	e.applyInventory(inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("a")}, "n-rack0002", "control-plane", 2))
	a := e.pending0("a")
	op, _ := e.svc.Get(a.JoinID)
	if op.State != wire.StatePending || !strings.Contains(op.AutoApproval, "taken by approved join "+y.JoinID) {
		t.Fatalf("a, its entry taken: %+v", op)
	}
}

// TestAutoApproveByTPM: a verified attestation is matched by its EK or
// its EK certificate; a registration that claims a TPM is never matched
// by its key, and one whose attestation failed is not approved even by
// an entry naming its key.
func TestAutoApproveByTPM(t *testing.T) {
	e := newEnv(t)
	ekCert := strings.Repeat("ef", 32)
	e.applyInventory(
		inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, "n-rack0001", "control-plane", 1),
		inventoryEntryFor(wire.InventoryMatch{EKCertSHA256: ekCert}, "n-rack0002", "control-plane", 2),
		inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("f")}, "n-rack0003", "control-plane", 3),
	)
	a := e.registerTPM("a", "control-plane")
	if op, _ := e.svc.Get(a.JoinID); op.State != wire.StatePending || op.AutoApproval != "" {
		t.Fatalf("a TPM joiner was matched before its proof: %+v", op)
	}
	ev := &wire.AttestationView{State: wire.AttestationVerified, EKSHA256: ekA, EKChain: "none"}
	if !e.attested(a.JoinID, ev) || ev.InventoryNodeID != "n-rack0001" {
		t.Fatalf("a verified EK in the inventory: not approved (%+v)", ev)
	}
	op, _ := e.svc.Get(a.JoinID)
	if op.State != wire.StateDelivering || op.Assignment.NodeID != "n-rack0001" || op.ApprovedBy != inventoryActor {
		t.Fatalf("a: %+v", op)
	}
	if au := e.auditOf("join.approved", a.JoinID); au == nil || au.Data["match"] != "ekSha256" || au.Data["matchHash"] != ekA || au.Data["ekChain"] != "none" {
		t.Fatalf("audit: %+v", au)
	}

	c := e.registerTPM("c", "control-plane")
	if !e.attested(c.JoinID, &wire.AttestationView{State: wire.AttestationVerified, EKSHA256: ekB, EKCertSHA256: ekCert}) {
		t.Fatal("a verified EK whose certificate is in the inventory: not approved")
	}
	if op, _ := e.svc.Get(c.JoinID); op.State != wire.StateApproved || op.Assignment.NodeID != "n-rack0002" {
		t.Fatalf("c: %+v", op)
	}

	// f's key is inventoried, but f claimed a TPM whose proof failed.
	f := e.registerTPM("f", "control-plane")
	failed := &wire.AttestationView{State: wire.AttestationFailed, EKSHA256: ekB}
	if e.attested(f.JoinID, failed) {
		t.Fatal("a failed attestation was approved")
	}
	op, _ = e.svc.Get(f.JoinID)
	if op.State != wire.StatePending || !strings.Contains(op.AutoApproval, "not verified") || failed.Reason == "" {
		t.Fatalf("f: %+v (%+v)", op, failed)
	}
	// Verified, but its EK is in no entry: its key entry does not count.
	unknown := &wire.AttestationView{State: wire.AttestationVerified, EKSHA256: ekB}
	if e.attested(f.JoinID, unknown) || !strings.Contains(unknown.Reason, "no inventory entry matches its TPM") {
		t.Fatalf("f verified with an unknown EK: %+v", unknown)
	}
}

// TestAutoApproveReinstall: a verified TPM whose entry's node id is an
// active member is that machine reinstalled: in one transaction the old
// member goes and the new registration takes its node id and addresses.
func TestAutoApproveReinstall(t *testing.T) {
	bao := newFakeBao()
	bao.root = false
	e := newEnv(t, func(c *Config) { c.OpenBao = bao })
	oldJoin, node := e.joinFully("a", 1)
	m, _ := e.member(node)
	entry := inventoryEntryFor(wire.InventoryMatch{EKSHA256: ekA}, node, "control-plane", 1)
	e.applyInventory(entry)
	g := e.generation()

	// The reinstalled machine: a new key, the same TPM.
	a2 := e.registerTPM("a2", "control-plane")
	if !e.attested(a2.JoinID, &wire.AttestationView{State: wire.AttestationVerified, EKSHA256: ekA}) {
		t.Fatal("the reinstalled machine was not approved")
	}
	op, _ := e.svc.Get(a2.JoinID)
	if op.Assignment == nil || op.Assignment.NodeID != node || op.Assignment.MgmtIP != m.MgmtIP || !strings.Contains(op.AutoApproval, "replaces member "+node) {
		t.Fatalf("the replacement: %+v", op)
	}
	if nm, found := e.member(node); found && nm.JoinID == oldJoin {
		t.Fatalf("the old member is still there: %+v", nm)
	}
	if e.generation() <= g {
		t.Errorf("generation %d, want above %d", e.generation(), g)
	}
	au := e.auditOf("cluster.member.replaced", node)
	if au == nil || au.Actor != inventoryActor || au.Data["oldKey"] != keyPin("a") || au.Data["newKey"] != keyPin("a2") || au.Data["match"] != "ekSha256" {
		t.Fatalf("audit of the replacement: %+v", au)
	}
	if au := e.auditOf("cluster.member.removed", node); au == nil || au.Data["replacedBy"] != a2.JoinID {
		t.Fatalf("audit of the removal: %+v", au)
	}

	// A key fingerprint does not replace a member: b's key names the
	// replaced node's entry, which a join now holds.
	e.applyInventory(inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("b")}, node, "control-plane", 1))
	b := e.pending0("b")
	if op, _ := e.svc.Get(b.JoinID); op.State != wire.StatePending || op.AutoApproval == "" {
		t.Fatalf("b matched by its key an entry of a held node: %+v", op)
	}
}

// TestReplaceMember: every refusal changes nothing; a replacement removes
// the old member and approves the registration with what it had.
func TestReplaceMember(t *testing.T) {
	bao := newFakeBao()
	bao.root = false
	e := newEnv(t, func(c *Config) { c.OpenBao = bao })
	oldJoin, node := e.joinFully("a", 1)
	_, other := e.joinFully("b", 2)
	e.applied(node)
	e.applied(other)
	m, _ := e.member(node)
	newcomer := e.pending("n")
	worker, _, err := e.register("w", e.token("worker", 1), clusterRelease, false)
	if err != nil {
		t.Fatal(err)
	}
	// c's join is installing: its member cannot be replaced.
	cJoin, c := e.joinFully("c", 3)
	if op, _ := e.svc.Get(cJoin); op.State != wire.StateInstalling {
		t.Fatalf("c: %+v", op)
	}
	done, _ := e.svc.Get(oldJoin)

	for _, r := range []struct {
		name, node, join, reason string
		code                     apierr.Code
	}{
		{"an unknown node", "n-nosuchnd", newcomer.JoinID, "swap", apierr.NotFound},
		{"an unknown join", node, "j-nosuchjn", "swap", apierr.NotFound},
		{"the founder", e.id.FounderNodeID, newcomer.JoinID, "swap", apierr.Conflict},
		{"a member still installing", c, newcomer.JoinID, "swap", apierr.Conflict},
		{"a join not pending", node, done.JoinID, "swap", apierr.JoinApprovalRefused},
		{"another role", node, worker.JoinID, "swap", apierr.JoinApprovalRefused},
		{"no reason", node, newcomer.JoinID, "", apierr.InvalidInput},
	} {
		t.Run(r.name, func(t *testing.T) {
			g, n, audits := e.generation(), len(e.members()), e.auditCount()
			_, err := e.svc.ReplaceMember(e.admin, r.node, r.join, r.reason)
			wantCode(t, err, r.code)
			if e.generation() != g || len(e.members()) != n || e.auditCount() != audits {
				t.Errorf("a refused replacement changed the store")
			}
			if op, _ := e.svc.Get(newcomer.JoinID); op.State != wire.StatePending {
				t.Errorf("the newcomer: %+v", op)
			}
		})
	}

	op, err := e.svc.ReplaceMember(e.admin, node, newcomer.JoinID, "mainboard swapped")
	if err != nil {
		t.Fatal(err)
	}
	a := op.Assignment
	if a == nil || a.NodeID != node || a.MgmtIP != m.MgmtIP || a.Networks["storage"] != m.Networks["storage"] || a.Labels["topology.rack"] != m.Labels["topology.rack"] || op.ApprovedBy != e.admin.Subject {
		t.Fatalf("the newcomer: %+v", op)
	}
	if nm, found := e.member(node); found && nm.JoinID == oldJoin {
		t.Fatalf("the old member is still there: %+v", nm)
	}
	au := e.auditOf("cluster.member.replaced", node)
	if au == nil || au.Actor != e.admin.Subject || au.Data["reason"] != "mainboard swapped" || au.Data["oldKey"] != keyPin("a") || au.Data["newKey"] != keyPin("n") {
		t.Fatalf("audit: %+v", au)
	}
	// The old leaf no longer counts.
	err = e.db.View(func(tx *store.Tx) error {
		_, err := cluster.CheckNodeLeaf(tx, node, m.LeafSerial)
		return err
	})
	if err == nil {
		t.Error("the replaced member's leaf still counts")
	}
}

// TestAutoApproveWaitingAtImport: machines that registered before the
// document arrived are matched when it is applied, by their key; one that
// claimed a TPM is not matched by its key, then or at registration.
func TestAutoApproveWaitingAtImport(t *testing.T) {
	e := newEnv(t)
	early := e.pending("early")
	tpm := e.registerTPM("tpm", "control-plane")
	e.applyInventory(
		inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("early")}, "n-rack0001", "control-plane", 1),
		inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("tpm")}, "n-rack0002", "control-plane", 2),
	)
	if op, _ := e.svc.Get(early.JoinID); op.State != wire.StateDelivering || op.Assignment.NodeID != "n-rack0001" || op.ApprovedBy != inventoryActor {
		t.Fatalf("a machine pending before the import: %+v", op)
	}
	if op, _ := e.svc.Get(tpm.JoinID); op.State != wire.StatePending || op.AutoApproval != "" {
		t.Fatalf("a TPM joiner matched by its key at import: %+v", op)
	}
	// Nor by its key when autoApprove is asked without an attestation.
	if e.attested(tpm.JoinID, nil) {
		t.Fatal("a TPM joiner was matched by its key")
	}
	late := e.registerTPM("late", "control-plane")
	e.applyInventory(inventoryEntryFor(wire.InventoryMatch{KeyFingerprint: keyPin("late")}, "n-rack0003", "control-plane", 3))
	if op, _ := e.svc.Get(late.JoinID); op.State != wire.StatePending {
		t.Fatalf("a TPM joiner matched by its key: %+v", op)
	}
}

// TestAutoApproveVerifiedAtImport: a TPM joiner that proved its TPM
// before the document named it is matched by its EK when the document
// arrives, with the inventory's word on its attestation; one whose proof
// has not come is not, even though an entry names its EK.
func TestAutoApproveVerifiedAtImport(t *testing.T) {
	e := newEnv(t)
	j := newJoinerTPM(t)
	v, err := e.registerClaim("proved", j.wireClaim())
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.Attest(keyPin("proved"), v.JoinID, j.answer(t, v.Attestation.Challenge, keyPin("proved")))
	if err != nil || got.Attestation.State != wire.AttestationVerified || got.State != wire.StatePending {
		t.Fatalf("the proof before any inventory: %+v %v", got, err)
	}
	unproved := e.registerTPM("unproved", "control-plane")

	e.applyInventory(
		inventoryEntryFor(wire.InventoryMatch{EKSHA256: got.Attestation.EKSHA256}, "n-rack0001", "control-plane", 1),
		inventoryEntryFor(wire.InventoryMatch{EKSHA256: unproved.Attestation.EKSHA256}, "n-rack0002", "control-plane", 2),
	)
	op, _ := e.svc.Get(v.JoinID)
	if op.State != wire.StateDelivering || op.Assignment == nil || op.Assignment.NodeID != "n-rack0001" || op.ApprovedBy != inventoryActor {
		t.Fatalf("a verified TPM pending before the import: %+v", op)
	}
	if op.Attestation.InventoryNodeID != "n-rack0001" || op.Attestation.Reason != "" {
		t.Errorf("its attestation after the import: %+v", op.Attestation)
	}
	if au := e.auditOf("join.approved", v.JoinID); au == nil || au.Actor != inventoryActor || au.Data["match"] != "ekSha256" || au.Data["matchHash"] != got.Attestation.EKSHA256 {
		t.Fatalf("audit of the approval: %+v", au)
	}
	if op, _ := e.svc.Get(unproved.JoinID); op.State != wire.StatePending || op.Assignment != nil {
		t.Fatalf("a TPM joiner that has not proved its TPM was matched at import: %+v", op)
	}
}
