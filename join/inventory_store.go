package join

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/iam"
	"stratum/store"
	"stratum/wire"
)

// inventoryRecord is an entry as stored, under its match key; Index keeps
// the document's order for the list.
type inventoryRecord struct {
	Index int                 `json:"index"`
	Entry wire.InventoryEntry `json:"entry"`
}

// inventoryMetaRecord is who applied the document, when, and how many
// entries it has.
type inventoryMetaRecord struct {
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
	Count     int       `json:"count"`
}

// Inventory states of an entry (InventoryEntryView.State).
const (
	InventoryExpected = "expected" // nothing took its node id yet
	InventoryJoining  = "joining"  // a join holding its node id is under way
	InventoryMember   = "member"   // its node id is an active member
)

// ApplyInventory replaces the inventory with doc, whole, audited
// inventory.applied with the count. Besides the document's own problems
// it refuses, naming the field, an entry whose address may not go into a
// node certificate, and an entry whose node id or addresses are taken by
// a member or an approved join that is not its own node (the same node
// id at the same management address: a machine inventoried after it
// joined, or a reinstall to come). A refused document changes nothing.
func (s *Service) ApplyInventory(by iam.Principal, doc wire.Inventory) (wire.InventoryView, error) {
	if err := inventoryDocProblems(doc).Err(inventoryProblems); err != nil {
		return wire.InventoryView{}, err
	}
	doc = normalizedInventory(doc)
	var out wire.InventoryView
	err := s.update(func(t *txn) error {
		if err := t.inventoryRefusals(doc); err != nil {
			return err
		}
		var stale []string
		if err := bucketInventory.Keys(t.Tx, func(k string) error { stale = append(stale, k); return nil }); err != nil {
			return err
		}
		for _, k := range stale {
			if err := bucketInventory.Delete(t.Tx, k); err != nil {
				return err
			}
		}
		for i, e := range doc.Machines {
			if err := bucketInventory.Put(t.Tx, matchKey(e.Match), inventoryRecord{Index: i, Entry: e}); err != nil {
				return err
			}
		}
		actor := actorOf(by)
		if err := inventoryMeta.Put(t.Tx, inventoryMetaRecord{UpdatedAt: t.now, UpdatedBy: actor, Count: len(doc.Machines)}); err != nil {
			return err
		}
		if err := t.Audit("inventory.applied", actor, "inventory", map[string]string{"count": strconv.Itoa(len(doc.Machines))}); err != nil {
			return err
		}
		if err := t.approveWaiting(doc); err != nil {
			return err
		}
		var err error
		out, err = inventoryView(t.Tx)
		return err
	})
	return out, err
}

// inventoryRefusals lists, for every entry at once, what the cluster
// refuses of it.
func (t *txn) inventoryRefusals(doc wire.Inventory) error {
	c, err := loadClaims(t.Tx, "", t.s.decoded)
	if err != nil {
		return err
	}
	var invalid, taken apierr.Fields
	for i, e := range doc.Machines {
		at := fmt.Sprintf("machines[%d].", i)
		why, err := t.s.mgmtAddrProblem(t.Tx, e.MgmtIP)
		if err != nil {
			return err
		}
		if why != "" {
			invalid.Add(at+"mgmtIp", "%s cannot go into a node certificate: %s", e.MgmtIP, why)
		}
		holder, err := t.nodeHolderAt(&c, e.NodeID)
		if err != nil {
			return err
		}
		if holder.held && holder.mgmtIP != e.MgmtIP {
			taken.Add(at+"nodeId", "%s is already held by %s at %s: an entry for it names that address", e.NodeID, holder.who, holder.mgmtIP)
		}
		for _, ip := range entryAddrs(e) {
			h, err := t.addrHolderAt(&c, ip.addr)
			if err != nil {
				return err
			}
			if h.held && h.nodeID != e.NodeID {
				taken.Add(at+ip.field, "%s is already %s", ip.addr, h.who)
			}
		}
	}
	if err := invalid.Err(inventoryProblems); err != nil {
		return err
	}
	if len(taken) > 0 {
		return apierr.WithFields(apierr.Conflict, "the inventory conflicts with the cluster; every conflict is listed", taken)
	}
	return nil
}

// holder is who holds a node id or an address: a member or an approved
// join, with its node id and management address.
type holder struct {
	held           bool
	who            string
	nodeID, mgmtIP string
}

// nodeHolderAt is the member or approved join holding nodeID.
func (t *txn) nodeHolderAt(c *claims, nodeID string) (holder, error) {
	for _, m := range c.members {
		if m.NodeID == nodeID {
			return holder{held: true, who: "member " + m.NodeID, nodeID: m.NodeID, mgmtIP: normalIPOrEmpty(m.MgmtIP)}, nil
		}
	}
	return t.queuedHolder(claimedBy(t.Tx, "n/"+nodeID, ""))
}

// addrHolderAt is the member or approved join one of whose addresses is ip.
func (t *txn) addrHolderAt(c *claims, ip string) (holder, error) {
	for _, m := range c.members {
		if memberHasAddr(m, ip) {
			return holder{held: true, who: "an address of member " + m.NodeID, nodeID: m.NodeID, mgmtIP: normalIPOrEmpty(m.MgmtIP)}, nil
		}
	}
	h, err := t.queuedHolder(claimedBy(t.Tx, "a/"+ip, ""))
	if h.held {
		h.who = "an address of " + h.who
	}
	return h, err
}

func memberHasAddr(m cluster.Member, ip string) bool {
	if normalIPOrEmpty(m.MgmtIP) == ip {
		return true
	}
	for _, n := range m.Networks {
		if normalIPOrEmpty(n.IP) == ip {
			return true
		}
	}
	return false
}

// queuedHolder is the approved join joinID ("" for none).
func (t *txn) queuedHolder(joinID string) (holder, error) {
	if joinID == "" {
		return holder{}, nil
	}
	r, found, err := t.getRecord(joinID)
	if err != nil || !found || r.Assignment == nil {
		return holder{}, err
	}
	return holder{held: true, who: "approved join " + joinID, nodeID: r.Assignment.NodeID, mgmtIP: normalIPOrEmpty(r.Assignment.MgmtIP)}, nil
}

// Inventory lists the entries in the document's order with what became
// of each.
func (s *Service) Inventory() (wire.InventoryView, error) {
	var out wire.InventoryView
	err := s.view(func(tx *store.Tx) error {
		var err error
		out, err = inventoryView(tx)
		return err
	})
	return out, err
}

func inventoryView(tx *store.Tx) (wire.InventoryView, error) {
	out := wire.InventoryView{Machines: []wire.InventoryEntryView{}}
	meta, _, err := inventoryMeta.Get(tx)
	if err != nil {
		return out, err
	}
	out.UpdatedAt, out.UpdatedBy = meta.UpdatedAt, meta.UpdatedBy
	var recs []inventoryRecord
	if err := bucketInventory.ForEach(tx, func(_ string, r inventoryRecord) error { recs = append(recs, r); return nil }); err != nil {
		return out, err
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Index < recs[j].Index })
	for _, r := range recs {
		state, joinID, err := entryState(tx, r.Entry.NodeID)
		if err != nil {
			return out, err
		}
		out.Machines = append(out.Machines, wire.InventoryEntryView{InventoryEntry: r.Entry, State: state, JoinID: joinID})
	}
	return out, nil
}

// entryState is what became of the entry for nodeID: a member (active or
// still joining) or an approved join holds its node id, or nothing yet.
func entryState(tx *store.Tx, nodeID string) (string, string, error) {
	m, found, err := cluster.GetMember(tx, nodeID)
	if err != nil {
		return "", "", err
	}
	switch {
	case found && m.State == cluster.MemberActive:
		return InventoryMember, m.JoinID, nil
	case found:
		return InventoryJoining, m.JoinID, nil
	}
	if id := claimedBy(tx, "n/"+nodeID, ""); id != "" {
		return InventoryJoining, id, nil
	}
	return InventoryExpected, "", nil
}

// inventoryEntry is the entry stored under match key k.
func inventoryEntry(tx *store.Tx, k string) (wire.InventoryEntry, bool, error) {
	r, found, err := bucketInventory.Get(tx, k)
	return r.Entry, found, err
}

// approveWaiting gives the registrations already pending when the
// document arrives (machines that booted before the operator applied it)
// what a registration gets, oldest first: those that claimed no TPM are
// matched by their key when an entry names it; those whose TPM
// attestation is already verified are matched by their EK (or its
// certificate) when an entry names it, as if their proof came now. A
// TPM joiner whose proof is not verified (yet, or ever) is not matched.
func (t *txn) approveWaiting(doc wire.Inventory) error {
	byKey, byTPM := map[string]bool{}, map[string]bool{}
	for _, e := range doc.Machines {
		if e.Match.KeyFingerprint != "" {
			byKey[e.Match.KeyFingerprint] = true
		} else {
			byTPM[matchKey(e.Match)] = true
		}
	}
	var waiting []record
	for pin := range byKey {
		id := bucketKeys.Get(t.Tx, pin)
		if id == nil {
			continue
		}
		r, found, err := t.getRecord(string(id))
		if err != nil {
			return err
		}
		if found && r.State == wire.StatePending && !r.TPMClaim {
			waiting = append(waiting, r)
		}
	}
	if len(byTPM) > 0 {
		// Rare (an operator's import), so a scan of the registrations
		// rather than an index every proof keeps.
		err := bucketRegistrations.ForEach(t.Tx, func(_ string, r record) error {
			if r.State == wire.StatePending && r.Attestation.verifiedMatches(byTPM) {
				waiting = append(waiting, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].Seq < waiting[j].Seq })
	for i := range waiting {
		r := &waiting[i]
		if r.Attestation != nil {
			if err := t.autoApproveAttested(r); err != nil {
				return err
			}
			continue
		}
		if _, err := t.autoApprove(r, nil); err != nil {
			return err
		}
	}
	return nil
}
