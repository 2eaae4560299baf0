package agent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"stratum/crypto"
)

// Files of ROOT the agent reads and writes.
const (
	nodeYAMLPath = "etc/stratum/node.yaml"
	nodeCertPath = "etc/stratum/secrets/node.crt"
	nodeKeyPath  = "etc/stratum/secrets/node.key"
	// nodeKeyNextPath holds a renewed leaf's key while its certificate is
	// written (renewLeaf): a crash between the two files leaves a pair
	// that loadIdentity can still complete.
	nodeKeyNextPath = "etc/stratum/secrets/node.key.next"
	caPath          = "etc/stratum/secrets/ca.pem"
	releasePath     = "etc/stratum/release"
	membersPath     = "etc/stratum/members.json"
)

// identity is who this node is and whom it trusts.
type identity struct {
	nodeID    string
	clusterID string
	mgmtIP    string
	// cert is the transport leaf (with the CA after it) every handshake
	// presents, client and server: a renewal swaps it in place.
	cert  atomic.Pointer[tls.Certificate]
	ca    *x509.Certificate
	cas   *x509.CertPool
	caPin string
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
	cert, err := loadLeafPair(root)
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
	id := &identity{nodeID: ny.NodeID, clusterID: ny.ClusterID, mgmtIP: ny.Mgmt.Address,
		ca: ca, cas: pool, caPin: crypto.SPKIPin(ca)}
	if err := id.checkLeaf(leaf); err != nil {
		return nil, fmt.Errorf("%s: %w", nodeCertPath, err)
	}
	id.setLeaf(cert, leaf)
	return id, nil
}

// loadLeafPair reads node.crt and node.key. When they do not match and a
// renewal's key (node.key.next) matches the certificate, the renewal
// stopped between its files: its key is written as node.key.
func loadLeafPair(root string) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(root, nodeCertPath), filepath.Join(root, nodeKeyPath)
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err == nil {
		return cert, nil
	}
	next, nerr := os.ReadFile(filepath.Join(root, nodeKeyNextPath))
	certPEM, cerr := os.ReadFile(certPath)
	if nerr != nil || cerr != nil {
		return cert, err
	}
	pair, perr := tls.X509KeyPair(certPEM, next)
	if perr != nil {
		return cert, err
	}
	if werr := crypto.WriteFileAtomic(keyPath, next, 0o600); werr != nil {
		return cert, fmt.Errorf("completing a renewal's %s: %w", nodeKeyPath, werr)
	}
	_ = os.Remove(filepath.Join(root, nodeKeyNextPath))
	return pair, nil
}

// checkLeaf: leaf is this node's, from this cluster's CA (the one
// delivered, or a renewal's).
func (id *identity) checkLeaf(leaf *x509.Certificate) error {
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: id.cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("does not verify against %s: %v", caPath, err)
	}
	if leaf.Subject.CommonName != id.nodeID {
		return fmt.Errorf("is node %s's leaf, but node.yaml names %s", leaf.Subject.CommonName, id.nodeID)
	}
	return nil
}

// setLeaf makes cert (leaf parsed) what every later handshake presents,
// with the CA after it, as the founder's listeners send theirs.
func (id *identity) setLeaf(cert tls.Certificate, leaf *x509.Certificate) {
	cert.Certificate = append(cert.Certificate[:1:1], id.ca.Raw)
	cert.Leaf = leaf
	id.cert.Store(&cert)
}

// leaf is the current transport leaf.
func (id *identity) leaf() *x509.Certificate { return id.cert.Load().Leaf }

// clientTLS trusts only the founder of this cluster: the pinned CA and the
// founder URI SAN of this cluster id, as the joiner does. A member's leaf
// chains to the same CA and would otherwise pass.
func (id *identity) clientTLS() *tls.Config {
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return id.cert.Load(), nil
		},
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
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return id.cert.Load(), nil
		},
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  id.cas,
		MinVersion: tls.VersionTLS12,
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
