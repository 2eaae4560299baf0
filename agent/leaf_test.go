package agent

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"stratum/crypto"
)

// TestLoadLeafPairAfterInterruptedRenewal: a renewal writes node.key.next,
// node.crt, then node.key. Stopped between the certificate and the key,
// the node's files still load: the key that matches the certificate is
// taken from node.key.next and written as node.key (0600). Without it, a
// mismatched pair is refused.
func TestLoadLeafPairAfterInterruptedRenewal(t *testing.T) {
	ca, err := crypto.NewCA(testCluster, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	issue := func() *crypto.Leaf {
		l, err := ca.Issue(crypto.LeafRequest{CommonName: testNode, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Client: true, Server: true, Validity: time.Hour}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cases := []struct {
		name     string
		withNext bool
		wantErr  bool
	}{
		{"stopped before node.key", true, false},
		{"a mismatched pair, no node.key.next", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := node(t, ca, testNode)
			renewed, old := issue(), issue()
			write := func(rel string, b []byte) {
				if err := os.WriteFile(filepath.Join(root, rel), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(nodeCertPath, renewed.CertPEM)
			write(nodeKeyPath, old.KeyPEM)
			if tc.withNext {
				write(nodeKeyNextPath, renewed.KeyPEM)
			}
			id, err := loadIdentity(root)
			if tc.wantErr {
				if err == nil {
					t.Fatal("a mismatched pair loaded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !id.leaf().Equal(renewed.Cert) {
				t.Error("the identity is not the renewed leaf")
			}
			key, _ := os.ReadFile(filepath.Join(root, nodeKeyPath))
			st, _ := os.Stat(filepath.Join(root, nodeKeyPath))
			if !bytes.Equal(key, renewed.KeyPEM) || st.Mode().Perm() != 0o600 {
				t.Errorf("node.key is not the renewed key at 0600 (%v)", st.Mode())
			}
			if _, err := os.Stat(filepath.Join(root, nodeKeyNextPath)); !os.IsNotExist(err) {
				t.Errorf("node.key.next remains: %v", err)
			}
		})
	}
}
