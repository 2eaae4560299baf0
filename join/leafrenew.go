package join

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/strictjson"
	"stratum/wire"
)

// nodeLeafRequest is what a node's transport leaf certifies, at delivery
// and at each renewal: its node id (CommonName and DNS SAN) and mgmt IP,
// client and server auth, for leafValidity. It never carries a URI SAN:
// stratum:// names the founder, and a member must not be able to pass
// for it (SPEC 10.3).
func nodeLeafRequest(nodeID, mgmtIP string, pub *ecdsa.PublicKey) crypto.LeafRequest {
	req := crypto.LeafRequest{CommonName: nodeID, DNSNames: []string{nodeID},
		IPs: []net.IP{net.ParseIP(mgmtIP)}, Client: true, Server: true, Validity: leafValidity}
	if pub != nil {
		req.PublicKey = pub
	}
	return req
}

// issueNodeLeaf issues req with the cluster CA and checks it names no
// founder.
func issueNodeLeaf(ca *crypto.CA, req crypto.LeafRequest, now time.Time) (*crypto.Leaf, error) {
	leaf, err := ca.Issue(req, now)
	if err != nil {
		return nil, err
	}
	if crypto.HasStratumURI(leaf.Cert) {
		return nil, fmt.Errorf("the leaf issued for %s carries a stratum:// URI SAN: refusing to deliver it", req.CommonName)
	}
	return leaf, nil
}

// DecodeNodeLeafRenewal decodes POST /v1/cluster/nodes/{nodeId}/leaf: the
// public key must be a PEM "PUBLIC KEY" holding an ECDSA P-256 key.
func DecodeNodeLeafRenewal(body []byte) (*ecdsa.PublicKey, error) {
	var req wire.NodeLeafRenewal
	var pub *ecdsa.PublicKey
	err := strictjson.DecodeChecked(body, &req, "the leaf renewal has problems", func() apierr.Fields {
		var f apierr.Fields
		var err error
		if req.PublicKey == "" {
			f.Add("publicKey", "required")
		} else if pub, err = parseP256PublicKey([]byte(req.PublicKey)); err != nil {
			f.Add("publicKey", "%v", err)
		}
		return f
	})
	return pub, err
}

func parseP256PublicKey(b []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("not a PEM \"PUBLIC KEY\"")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not a PKIX public key")
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("must be an ECDSA P-256 key")
	}
	return pub, nil
}

// RenewNodeLeaf issues member nodeID a new transport leaf for pub, asked
// with its current leaf (serial presentedSerial, which must count:
// cluster.CheckNodeLeaf). The leaf certifies what the current one does,
// for leafValidity, and is recorded as the member's NextLeafSerial: it
// counts beside the current one until the node first uses it, which
// promotes it (cluster.PromoteNodeLeaf). Asked again before that, the
// newer leaf replaces the unused one (the node lost it). Audited
// cluster.node.leaf.renewed.
func (s *Service) RenewNodeLeaf(nodeID, presentedSerial string, pub *ecdsa.PublicKey) (wire.NodeLeaf, error) {
	var out wire.NodeLeaf
	if pub == nil || pub.Curve != elliptic.P256() {
		var f apierr.Fields
		f.Add("publicKey", "must be an ECDSA P-256 key")
		return out, f.Err("the leaf renewal has problems")
	}
	err := s.update(func(t *txn) error {
		if _, err := cluster.PromoteNodeLeaf(t.Tx, nodeID, presentedSerial); err != nil {
			return err
		}
		m, err := cluster.CheckNodeLeaf(t.Tx, nodeID, presentedSerial)
		if err != nil {
			return err
		}
		ca, err := cluster.LoadCA(t.Tx)
		if err != nil {
			return err
		}
		leaf, err := issueNodeLeaf(ca, nodeLeafRequest(m.NodeID, m.MgmtIP, pub), t.now)
		if err != nil {
			return err
		}
		old, serial := m.LeafSerial, cluster.LeafSerial(leaf.Cert)
		m.NextLeafSerial = serial
		if err := cluster.PutMember(t.Tx, m); err != nil {
			return err
		}
		out = wire.NodeLeaf{Certificate: string(leaf.CertPEM), NotAfter: leaf.Cert.NotAfter.UTC()}
		return t.Audit("cluster.node.leaf.renewed", "node:"+nodeID, nodeID, map[string]string{
			"nodeId": nodeID, "oldSerial": old, "presentedSerial": presentedSerial, "newSerial": serial,
			"notAfter": leaf.Cert.NotAfter.UTC().Format(time.RFC3339)})
	})
	return out, err
}
