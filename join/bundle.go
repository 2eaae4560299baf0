package join

import (
	"stratum/cluster"
	"stratum/wire"
)

// bundleNodes are the members in joining or active, in join order.
func bundleNodes(members []cluster.Member) []wire.BundleNode {
	out := []wire.BundleNode{}
	for _, m := range members {
		if m.State != cluster.MemberJoining && m.State != cluster.MemberActive {
			continue
		}
		out = append(out, wire.BundleNode{NodeID: m.NodeID, Role: m.Role, AZ: m.AZ, MgmtIP: m.MgmtIP,
			Networks: orEmpty(m.Networks), Labels: orEmpty(m.Labels)})
	}
	return out
}

// withBoot copies nodes with each member's last probed boot health; a
// member not probed yet keeps none (the seed allows their omission).
func withBoot(nodes []wire.BundleNode, boot BootHealth) []wire.BundleNode {
	if boot == nil {
		return nodes
	}
	out := make([]wire.BundleNode, len(nodes))
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
