package cluster

import (
	"os"
	"time"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/store"
	"stratum/wire"
)

// Initialized reports whether tx holds a cluster (its identity is stored;
// read without the data key, so init never overwrites one).
func Initialized(tx *store.Tx) bool { return bucketCluster.Occupied(tx, keyIdentity) }

// Init creates the cluster identity, CA, secrets and the founder as member
// 1 inside tx. Secrets absent from the file are generated, except the
// OpenBao ones, which are never invented: the unseal key stays empty
// (single-instance OpenBao) and the founder's OpenBao token is the file's
// secrets.openBaoToken, openbao.tokenFile, or a converge's (SPEC 19).
func Init(tx *store.Tx, cfg Config, dev bool, now time.Time) (Identity, Secrets, *crypto.CA, error) {
	if Initialized(tx) {
		return Identity{}, Secrets{}, nil, apierr.New(apierr.Conflict, "the data directory already holds cluster; it is initialized once")
	}
	if err := cfg.Validate(dev); err != nil {
		return Identity{}, Secrets{}, nil, err
	}
	def := DevDefaults()
	or := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	dns := []string{}
	if cfg.DNSUpstreamServers != nil {
		dns = append(dns, *cfg.DNSUpstreamServers...)
	}
	id := Identity{
		ClusterID:          crypto.RandomID("cl-", 8),
		ParentDomain:       or(cfg.ParentDomain, def.ParentDomain),
		Region:             or(cfg.Region, def.Region),
		ClusterRelease:     or(cfg.ClusterRelease, def.ClusterRelease),
		AdminEmail:         or(cfg.AdminEmail, def.AdminEmail),
		DNSUpstreamServers: dns,
		FounderNodeID:      or(cfg.Founder.NodeID, crypto.RandomID("n-", 8)),
		VIPs:               cfg.VIPs,
		CreatedAt:          now.UTC(),
	}
	sec := Secrets{
		PostgresPassword:    or(cfg.Secrets.PostgresPassword, crypto.RandomPassword(32)),
		OpenBaoUnsealKey:    cfg.Secrets.OpenBaoUnsealKey,
		AxdnsdEncryptionKey: or(cfg.Secrets.AxdnsdEncryptionKey, crypto.RandomHex(32)),
		AdminPassword:       crypto.RandomPassword(24),
	}
	ca, err := crypto.NewCA(id.ClusterID, now)
	if err != nil {
		return id, sec, nil, err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return id, sec, nil, err
	}
	mgmt := cfg.Founder.MgmtIP
	if mgmt == "" {
		mgmt = "127.0.0.1"
	}
	founder := Member{MemberView: wire.MemberView{NodeID: id.FounderNodeID, Role: "control-plane", State: MemberActive, Generation: 1, AppliedGeneration: 1, MgmtIP: mgmt, AZ: cfg.Founder.AZ, Networks: cfg.Founder.Networks, Labels: cfg.Founder.Labels, JoinedAt: now.UTC(), Hostname: Hostname()}, Order: 1}
	steps := []func() error{
		func() error { return identity.Put(tx, id) },
		func() error { return bucketCluster.Put(tx, keyCACert, ca.CertPEM()) },
		func() error { return bucketSecrets.PutSealed(tx, keyCAKey, keyPEM) },
		func() error { return putSecrets(tx, sec) },
		func() error { return StoreOpenBao(tx, cfg.OpenBao) },
		func() error {
			if cfg.Secrets.OpenBaoToken == "" {
				return nil
			}
			return StoreOpenBaoToken(tx, cfg.Secrets.OpenBaoToken)
		},
		func() error { return PutMember(tx, founder) },
		func() error { return setGeneration(tx, 1) },
		func() error { return storeAdmissionRelease(tx, id.ClusterRelease) },
		func() error {
			return tx.Audit("cluster.initialized", "init", id.ClusterID, map[string]string{"founder": id.FounderNodeID, "release": id.ClusterRelease})
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return id, sec, nil, err
		}
	}
	return id, sec, ca, nil
}

// Hostname is the founder's host name, for its server certificate.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}
