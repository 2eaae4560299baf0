package join

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"stratum/cluster"
	"stratum/wire"
)

const (
	leafValidity     = 365 * 24 * time.Hour
	rolePostgres     = "postgres"
	roleControlPlane = "control-plane"
)

// deliver gives r its turn, all in the caller's transaction: admit the
// node at g+1, issue its transport leaf, and store the delivery sealed
// (the node key and cluster secrets never touch the file in plaintext).
func (t *txn) deliver(r *record) error { return t.deliverWith(r, nil) }

// deliverWith is deliver with what OpenBao granted a control-plane node
// (nil: no OpenBao tokens in the bundle).
func (t *txn) deliverWith(r *record, bao *openBaoGrant) error {
	if r.Assignment == nil {
		return fmt.Errorf("join %s is approved without an assignment", r.JoinID)
	}
	a := *r.Assignment
	id, err := cluster.LoadIdentity(t.Tx)
	if err != nil {
		return err
	}
	sec, err := cluster.LoadSecrets(t.Tx)
	if err != nil {
		return err
	}
	ca, err := cluster.LoadCA(t.Tx)
	if err != nil {
		return err
	}
	leaf, err := issueNodeLeaf(ca, nodeLeafRequest(a.NodeID, a.MgmtIP, nil), t.now)
	if err != nil {
		return err
	}
	serial := cluster.LeafSerial(leaf.Cert)
	nm := cluster.Member{MemberView: wire.MemberView{NodeID: a.NodeID, Role: r.Role, MgmtIP: a.MgmtIP, AZ: a.AZ, Networks: a.Networks, Labels: a.Labels, Hostname: r.Hostname}, JoinID: r.JoinID, LeafSerial: serial}
	if bao != nil {
		nm.OpenBaoAccessor = bao.node.Accessor // the token itself is kept nowhere but the sealed delivery
	}
	m, err := cluster.Admit(t.Tx, nm, t.now)
	if err != nil {
		return err
	}
	members, err := t.s.decoded.Members(t.Tx)
	if err != nil {
		return err
	}
	nodeYAML, err := renderNodeYAML(id, r.Role, a)
	if err != nil {
		return err
	}
	d := wire.Delivery{NodeYAML: nodeYAML, Bundle: buildBundle(id, sec, r.Role, members, string(ca.CertPEM()), string(leaf.CertPEM), string(leaf.KeyPEM), m.Generation)}
	if bao != nil {
		d.Bundle.OpenBaoToken, d.Bundle.OpenBaoNodeToken = bao.founderToken, bao.node.Token
	}
	if r.Role == roleControlPlane {
		d.Bundle.ControlPlane = t.s.cfg.ControlPlane
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := bucketDeliveries.PutSealed(t.Tx, r.JoinID, raw); err != nil {
		return err
	}
	r.State, r.Reason, r.Generation, r.DeliveredAt = wire.StateDelivering, "", m.Generation, t.now
	if err := t.putRecord(r); err != nil {
		return err
	}
	if err := t.setTurn(r.JoinID); err != nil {
		return err
	}
	g := strconv.FormatUint(m.Generation, 10)
	if err := t.Audit("cluster.member.admitted", systemActor, a.NodeID, map[string]string{"joinId": r.JoinID, "generation": g, "state": m.State}); err != nil {
		return err
	}
	if bao != nil {
		if err := t.Audit("openbao.node-token.minted", systemActor, a.NodeID, map[string]string{"joinId": r.JoinID, "accessor": bao.node.Accessor}); err != nil {
			return err
		}
	}
	return t.Audit("join.delivering", systemActor, r.JoinID, map[string]string{"nodeId": a.NodeID, "generation": g, "certSerial": serial})
}

// systemActor is the founder acting on its own (turns, timeouts).
const systemActor = "stratum"

func buildBundle(id cluster.Identity, sec cluster.Secrets, role string, members []cluster.Member, caPEM, certPEM, keyPEM string, g uint64) wire.Bundle {
	dns := id.DNSUpstreamServers
	if dns == nil {
		dns = []string{}
	}
	b := wire.Bundle{
		ClusterID: id.ClusterID, Role: role, Nodes: bundleNodes(members),
		ParentDomain: id.ParentDomain, Region: id.Region, DNSUpstreamServers: dns,
		CABundle: caPEM, NodeCert: certPEM, NodeKey: keyPEM, Generation: g,
	}
	// Each role receives what it runs (SPEC 16.1): a Postgres replica its
	// database password, a control plane every cluster secret, a worker
	// none. AdminPassword is the cluster control plane's own admin, never
	// a login of this appliance.
	switch role {
	case rolePostgres:
		b.PostgresPassword = sec.PostgresPassword
	case roleControlPlane:
		unseal := sec.OpenBaoUnsealKey
		b.PostgresPassword, b.AdminEmail, b.AdminPassword = sec.PostgresPassword, id.AdminEmail, sec.AdminPassword
		// The OpenBao tokens are not cluster secrets: deliverWith adds
		// them when the founder's OpenBao issued them (SPEC 19).
		b.OpenBaoUnsealKey, b.AxdnsdEncryptionKey = &unseal, sec.AxdnsdEncryptionKey
	}
	if !id.VIPs.Empty() {
		v := id.VIPs
		b.VIPs = &v
	}
	return b
}
