package cluster

import (
	"errors"
	"fmt"
	"time"

	"stratum/crypto"
	"stratum/store"
	"stratum/wire"
)

const (
	keyIdentity = "identity"
	keyCACert   = "ca-cert"
	keyCAKey    = "ca-key"
)

// ErrNotInitialized is returned for a data directory without a cluster.
var ErrNotInitialized = errors.New("the data directory holds no cluster: run `stratum init --data DIR --config cluster.yaml` (or `stratum serve --dev`)")

// Identity is the cluster's public identity.
type Identity struct {
	ClusterID          string    `json:"clusterId"`
	ParentDomain       string    `json:"parentDomain"`
	Region             string    `json:"region"`
	ClusterRelease     string    `json:"clusterRelease"`
	AdminEmail         string    `json:"adminEmail"`
	DNSUpstreamServers []string  `json:"dnsUpstreamServers"`
	FounderNodeID      string    `json:"founderNodeId"`
	VIPs               wire.VIPs `json:"vips"`
	CreatedAt          time.Time `json:"createdAt"`
	// Restored is set by `stratum restore` and kept after the take-over
	// (restore.go): nil for a founder that was never restored.
	Restored *RestoreMark `json:"restored,omitempty"`
}

// Secrets are the cluster secrets a delivery carries. The OpenBao tokens
// are not among them: they come from the cluster's OpenBao (SPEC 19), and
// the "openBaoToken" an earlier build invented at init is never read.
type Secrets struct {
	PostgresPassword    string
	OpenBaoUnsealKey    string
	AxdnsdEncryptionKey string
	AdminPassword       string
}

var secretNames = []string{"postgresPassword", "openBaoUnsealKey", "axdnsdEncryptionKey", "adminPassword"}

func (s *Secrets) fields() []*string {
	return []*string{&s.PostgresPassword, &s.OpenBaoUnsealKey, &s.AxdnsdEncryptionKey, &s.AdminPassword}
}

// LoadIdentity reads the identity; ErrNotInitialized when absent.
func LoadIdentity(tx *store.Tx) (Identity, error) {
	id, found, err := identity.Get(tx)
	if err != nil {
		return id, err
	}
	if !found {
		return id, ErrNotInitialized
	}
	if id.DNSUpstreamServers == nil {
		id.DNSUpstreamServers = []string{}
	}
	return id, nil
}

// LoadSecrets opens the sealed cluster secrets.
func LoadSecrets(tx *store.Tx) (Secrets, error) {
	var s Secrets
	for i, p := range s.fields() {
		v, found, err := bucketSecrets.GetSealed(tx, secretNames[i])
		if err != nil {
			return s, err
		}
		if !found {
			return s, fmt.Errorf("cluster secret %s is missing from the store", secretNames[i])
		}
		*p = string(v)
	}
	return s, nil
}

func putSecrets(tx *store.Tx, s Secrets) error {
	for i, p := range s.fields() {
		if err := bucketSecrets.PutSealed(tx, secretNames[i], []byte(*p)); err != nil {
			return err
		}
	}
	return nil
}

// CAPin is the pin of the CA certificate in the store (its record
// authenticated; backups name it in their header).
func CAPin(tx *store.Tx) (string, error) {
	certPEM := bucketCluster.Get(tx, keyCACert)
	if certPEM == nil {
		return "", ErrNotInitialized
	}
	cert, err := crypto.ParseCertPEM(certPEM)
	if err != nil {
		return "", err
	}
	return crypto.SPKIPin(cert), nil
}

// LoadCA reads the CA certificate and opens its sealed key.
func LoadCA(tx *store.Tx) (*crypto.CA, error) {
	certPEM := bucketCluster.Get(tx, keyCACert)
	if certPEM == nil {
		return nil, ErrNotInitialized
	}
	keyPEM, found, err := bucketSecrets.GetSealed(tx, keyCAKey)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("the CA key is missing from the store")
	}
	return crypto.LoadCA(append([]byte(nil), certPEM...), keyPEM)
}
