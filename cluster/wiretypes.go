package cluster

import "stratum/wire"

// A node's network binding and the cluster's VIPs cross the wire (in the
// bundle, the member views); package wire holds their shape.
type (
	// Network is one traffic class's binding on a node.
	Network = wire.Network
	// VIPs are the cluster's keepalived service VIPs.
	VIPs = wire.VIPs
)
