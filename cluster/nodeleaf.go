package cluster

import (
	"crypto/x509"

	"stratum/apierr"
	"stratum/store"
)

// CheckNodeLeaf decides whether a CA-verified client certificate may act
// as node nodeID (SPEC 10.3). Chaining to the cluster CA is not enough:
// the leaves of cancelled or failed joins still chain. The certificate
// must be the one delivered to a current member (its serial), and that
// member's join must be installing or joined.
//
// Members admitted before serials were recorded have no LeafSerial; for
// them the CommonName alone is accepted, as before, once vouched for.
// Every node admitted from now on is checked by serial.
//
// A renewed leaf (NextLeafSerial) counts beside the current one until
// it is first used: PromoteNodeLeaf then makes it the only one.
func CheckNodeLeaf(tx *store.Tx, nodeID, serialHex string) (Member, error) {
	m, found, err := GetMember(tx, nodeID)
	if err != nil {
		return m, err
	}
	return m, checkNodeLeaf(m, found, nodeID, serialHex)
}

// checkNodeLeaf is CheckNodeLeaf's rule over nodeID's member as read.
func checkNodeLeaf(m Member, found bool, nodeID, serialHex string) error {
	next := m.NextLeafSerial != "" && m.NextLeafSerial == serialHex
	if !found || (m.LeafSerial != "" && m.LeafSerial != serialHex && !next) {
		return apierr.New(apierr.Unauthenticated, "the node certificate for %s (serial %s) is not the one delivered to a current member: it was replaced, or its join was cancelled, failed or rejected", nodeID, serialHex)
	}
	if !m.Vouched() {
		return apierr.New(apierr.Forbidden, "node %s is still in its delivery: its certificate counts once its join is installing or joined", nodeID)
	}
	return nil
}

// PromoteNodeLeaf makes the renewed leaf serialHex the member's only
// leaf when it is its NextLeafSerial and the leaf counts (CheckNodeLeaf):
// the leaf it replaces stops counting (audited cluster.node.leaf.promoted).
// It reports whether it wrote.
func PromoteNodeLeaf(tx *store.Tx, nodeID, serialHex string) (bool, error) {
	m, err := CheckNodeLeaf(tx, nodeID, serialHex)
	if err != nil || m.NextLeafSerial == "" || m.NextLeafSerial != serialHex {
		return false, err
	}
	old := m.LeafSerial
	m.LeafSerial, m.NextLeafSerial = serialHex, ""
	if err := PutMember(tx, m); err != nil {
		return false, err
	}
	return true, tx.Audit("cluster.node.leaf.promoted", "node:"+nodeID, nodeID, map[string]string{"oldSerial": old, "serial": serialHex})
}

// LeafSerial is how member records name a node's leaf (LeafSerial,
// NextLeafSerial): its serial in hex.
func LeafSerial(c *x509.Certificate) string { return c.SerialNumber.Text(16) }

// NodeLeaves checks node transport leaves against the store's
// membership: the HTTP layer's view of CheckNodeLeaf.
type NodeLeaves struct {
	DB *store.DB
	// Decoded, when set, keeps the member records the checks read (each
	// request of every node reads its own): one read again unchanged is
	// neither checked nor decoded again.
	Decoded *Decoded
}

// CheckNodeLeaf is CheckNodeLeaf in a read transaction of its own; the
// first request under a renewed leaf promotes it in a write transaction
// (only then: every other request reads).
func (l NodeLeaves) CheckNodeLeaf(nodeID, serialHex string) error {
	var promote bool
	err := l.DB.View(func(tx *store.Tx) error {
		var m Member
		var found bool
		var err error
		if l.Decoded != nil {
			m, found, err = l.Decoded.Member(tx, nodeID)
		} else {
			m, found, err = GetMember(tx, nodeID)
		}
		if err != nil {
			return err
		}
		if err := checkNodeLeaf(m, found, nodeID, serialHex); err != nil {
			return err
		}
		promote = m.NextLeafSerial != "" && m.NextLeafSerial == serialHex
		return nil
	})
	if err != nil || !promote {
		return err
	}
	return l.DB.Update(func(tx *store.Tx) error {
		_, err := PromoteNodeLeaf(tx, nodeID, serialHex)
		return err
	})
}
