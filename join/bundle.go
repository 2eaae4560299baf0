package join

import (
	"stratum/cluster"
)

// Delivery is what an approved joiner receives in its turn (SPEC 4.6).
type Delivery struct {
	NodeYAML string `json:"nodeYaml"`
	Bundle   Bundle `json:"bundle"`
}

// Bundle is the join bundle; field names are the seed's.
type Bundle struct {
	ClusterID    string       `json:"clusterId"`
	Role         string       `json:"role"`
	Nodes        []BundleNode `json:"nodes"`
	ParentDomain string       `json:"parentDomain"`
	Region       string       `json:"region"`
	// DNSUpstreamServers is always present: an empty list is a value
	// (resolve from the root servers), never an omission.
	DNSUpstreamServers []string `json:"dnsUpstreamServers"`
	CABundle           string   `json:"caBundle"`
	NodeCert           string   `json:"nodeCert"`
	NodeKey            string   `json:"nodeKey"`
	// The cluster secrets go by role (SPEC 16.1): a field a role does
	// not receive is absent, never an empty string. The unseal key is a
	// pointer because a control plane of a single-instance OpenBao
	// receives it empty.
	PostgresPassword    string  `json:"postgresPassword,omitempty"`
	AdminEmail          string  `json:"adminEmail,omitempty"`
	AdminPassword       string  `json:"adminPassword,omitempty"`
	OpenBaoToken        string  `json:"openBaoToken,omitempty"`
	OpenBaoNodeToken    string  `json:"openBaoNodeToken,omitempty"`
	AxdnsdEncryptionKey string  `json:"axdnsdEncryptionKey,omitempty"`
	OpenBaoUnsealKey    *string `json:"openBaoUnsealKey,omitempty"`
	Generation          uint64  `json:"generation"`
	// VIPs is absent when none are configured.
	VIPs *cluster.VIPs `json:"vips,omitempty"`
}

// BundleNode is one peer. Networks and labels are always present ({}):
// a joiner must never mistake "none" for "not carried" (seed: traffic
// collapsing onto the management plane, a half-declared topology).
type BundleNode struct {
	NodeID      string                     `json:"nodeId"`
	Role        string                     `json:"role"`
	AZ          string                     `json:"az"`
	MgmtIP      string                     `json:"mgmtIp"`
	Networks    map[string]cluster.Network `json:"networks"`
	Labels      map[string]string          `json:"labels"`
	BootState   string                     `json:"bootState,omitempty"`
	BootPhase   string                     `json:"bootPhase,omitempty"`
	BootPhaseMs int64                      `json:"bootPhaseMs,omitempty"`
	LastBootMs  int64                      `json:"lastBootMs,omitempty"`
}

// bundleNodes are the members in joining or active, in join order.
func bundleNodes(members []cluster.Member) []BundleNode {
	out := []BundleNode{}
	for _, m := range members {
		if m.State != cluster.MemberJoining && m.State != cluster.MemberActive {
			continue
		}
		out = append(out, BundleNode{NodeID: m.NodeID, Role: m.Role, AZ: m.AZ, MgmtIP: m.MgmtIP,
			Networks: orEmpty(m.Networks), Labels: orEmpty(m.Labels)})
	}
	return out
}

// withBoot copies nodes with each member's last probed boot health; a
// member not probed yet keeps none (the seed allows their omission).
func withBoot(nodes []BundleNode, boot BootHealth) []BundleNode {
	if boot == nil {
		return nodes
	}
	out := make([]BundleNode, len(nodes))
	for i, n := range nodes {
		if b, ok := boot.Boot(n.NodeID); ok {
			n.BootState, n.BootPhase, n.BootPhaseMs, n.LastBootMs = b.State, b.Phase, b.PhaseMs, b.LastBootMs
		}
		out[i] = n
	}
	return out
}

func orEmpty[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}
