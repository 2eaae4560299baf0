package joiner

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"stratum/crypto"
	"stratum/wire"
)

// secretFields are the bundle fields that are secrets (SPEC 4.6, the
// seed's "Sensitive"). They are written only to their own 0600 files and
// never to bundle.json; the unseal key is never written in plaintext at all.
var secretFields = []string{
	"nodeKey", "postgresPassword", "adminPassword", "openBaoToken",
	"openBaoNodeToken", "axdnsdEncryptionKey", "openBaoUnsealKey",
}

// parseBundle decodes the bundle twice: into its wire shape, and as a
// raw object for bundle.json, so fields this joiner does not know still
// reach the node (the seed's warning about fields lost on the way).
func parseBundle(raw json.RawMessage) (*wire.Bundle, map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil, errors.New("the delivery's bundle is not a JSON object")
	}
	var b wire.Bundle
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, nil, fmt.Errorf("the delivery's bundle: %v", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, nil, fmt.Errorf("the delivery's bundle: %v", err)
	}
	return &b, all, nil
}

// publicBundle is bundle.json: the bundle without its secrets.
func publicBundle(all map[string]json.RawMessage) ([]byte, error) {
	pub := make(map[string]json.RawMessage, len(all))
	for k, v := range all {
		if !slices.Contains(secretFields, k) {
			pub[k] = v
		}
	}
	b, err := json.MarshalIndent(pub, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// check validates what the node cannot run without, and returns the node
// id: the transport leaf's CommonName, which the founder issues for the
// assigned node id. The leaf must match its key and chain to the CA
// bundle, and that CA must be the one pinned by --ca-pin: a delivery for
// another cluster, or one whose pieces do not fit, is refused before a
// single file is written.
func checkBundle(b *wire.Bundle, caPin, nodeYAML string) (nodeID string, err error) {
	var missing []string
	for name, v := range map[string]string{"clusterId": b.ClusterID, "role": b.Role, "caBundle": b.CABundle, "nodeCert": b.NodeCert, "nodeKey": b.NodeKey} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("the delivery's bundle lacks %v", missing)
	}
	pair, err := tls.X509KeyPair([]byte(b.NodeCert), []byte(b.NodeKey))
	if err != nil {
		return "", fmt.Errorf("the delivery's nodeCert and nodeKey do not form a key pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "", fmt.Errorf("the delivery's nodeCert: %v", err)
	}
	roots := x509.NewCertPool()
	pinned := false
	for _, c := range parseCerts([]byte(b.CABundle)) {
		roots.AddCert(c)
		pinned = pinned || crypto.SPKIPin(c) == normalPin(caPin)
	}
	if !pinned {
		return "", fmt.Errorf("the delivery's caBundle does not hold the cluster CA pinned by --ca-pin %s", caPin)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return "", fmt.Errorf("the delivery's nodeCert does not chain to its caBundle: %v", err)
	}
	nodeID = leaf.Subject.CommonName
	if nodeID == "" {
		return "", errors.New("the delivery's nodeCert has no CommonName (the node id)")
	}
	var ny struct {
		NodeID string `yaml:"nodeId"`
	}
	if err := yaml.Unmarshal([]byte(nodeYAML), &ny); err != nil {
		return "", fmt.Errorf("the delivery's nodeYaml is not YAML: %v", err)
	}
	if ny.NodeID != "" && ny.NodeID != nodeID {
		return "", fmt.Errorf("the delivery's node.yaml names node %s but its certificate is issued to %s", ny.NodeID, nodeID)
	}
	return nodeID, nil
}

// parseCerts returns the certificates of a PEM bundle; blocks of other
// types are skipped.
func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type == "CERTIFICATE" {
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
				out = append(out, c)
			}
		}
	}
}
