package agent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"stratum/crypto"
)

// Files of ROOT the agent reads and writes.
const (
	nodeYAMLPath = "etc/stratum/node.yaml"
	nodeCertPath = "etc/stratum/secrets/node.crt"
	nodeKeyPath  = "etc/stratum/secrets/node.key"
	caPath       = "etc/stratum/secrets/ca.pem"
	releasePath  = "etc/stratum/release"
	membersPath  = "etc/stratum/members.json"
)

// identity is who this node is and whom it trusts.
type identity struct {
	nodeID    string
	clusterID string
	mgmtIP    string
	cert      tls.Certificate
	cas       *x509.CertPool
	caPin     string
}

// nodeYAML is what the agent reads of the joiner's node.yaml.
type nodeYAML struct {
	NodeID    string `yaml:"nodeId"`
	ClusterID string `yaml:"clusterId"`
	Mgmt      struct {
		Address string `yaml:"address"`
	} `yaml:"mgmt"`
}

// loadIdentity reads node.yaml, the leaf and the CA under root. The leaf
// must be the node's (CommonName = nodeId) and chain to the CA.
func loadIdentity(root string) (*identity, error) {
	raw, err := os.ReadFile(filepath.Join(root, nodeYAMLPath))
	if err != nil {
		return nil, fmt.Errorf("node.yaml: %w (is this node joined? run stratum join first)", err)
	}
	var ny nodeYAML
	if err := yaml.Unmarshal(raw, &ny); err != nil {
		return nil, fmt.Errorf("%s: %v", nodeYAMLPath, err)
	}
	if ny.NodeID == "" || ny.ClusterID == "" {
		return nil, fmt.Errorf("%s names no nodeId or clusterId", nodeYAMLPath)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(root, nodeCertPath), filepath.Join(root, nodeKeyPath))
	if err != nil {
		return nil, fmt.Errorf("the node's transport leaf: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nodeCertPath, err)
	}
	caPEM, err := os.ReadFile(filepath.Join(root, caPath))
	if err != nil {
		return nil, fmt.Errorf("the cluster CA: %w", err)
	}
	ca, err := crypto.ParseCertPEM(caPEM)
	if err != nil || !ca.IsCA {
		return nil, fmt.Errorf("%s holds no CA certificate", caPath)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%s does not verify against %s: %v", nodeCertPath, caPath, err)
	}
	if leaf.Subject.CommonName != ny.NodeID {
		return nil, fmt.Errorf("%s is node %s's leaf, but node.yaml names %s", nodeCertPath, leaf.Subject.CommonName, ny.NodeID)
	}
	// The CA goes out with the leaf, as the founder's listeners send theirs.
	cert.Certificate = append(cert.Certificate, ca.Raw)
	return &identity{nodeID: ny.NodeID, clusterID: ny.ClusterID, mgmtIP: ny.Mgmt.Address,
		cert: cert, cas: pool, caPin: crypto.SPKIPin(ca)}, nil
}

// clientTLS trusts only the founder of this cluster: the pinned CA and the
// founder URI SAN of this cluster id, as the joiner does. A member's leaf
// chains to the same CA and would otherwise pass.
func (id *identity) clientTLS() *tls.Config {
	return &tls.Config{
		Certificates:       []tls.Certificate{id.cert},
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection (crypto.VerifyFounder)
		VerifyConnection: func(cs tls.ConnectionState) error {
			return crypto.VerifyFounder(cs.PeerCertificates, id.caPin, id.clusterID, time.Now())
		},
	}
}

// serverTLS serves /startupz to the founder only: a client leaf of the
// cluster CA carrying the founder's URI SAN (SPEC 16.10). A node leaf
// (of a cancelled, rejected or failed join among them) is refused.
func (id *identity) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{id.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    id.cas,
		MinVersion:   tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !crypto.IsFounderLeaf(cs.PeerCertificates[0], id.clusterID) {
				return errors.New("/startupz answers the founder's prober only (a client leaf with the founder's URI SAN)")
			}
			return nil
		},
	}
}

// isTrustError: the server is not this cluster's founder; retrying a
// handshake does not change who it is, but the founder may come back at
// that address, so the caller backs off like any other error and says so.
func isTrustError(err error) bool {
	var fe *crypto.FounderTrustError
	return errors.As(err, &fe)
}
