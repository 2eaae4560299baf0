package join

import (
	"fmt"
	"sort"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/store"
	"stratum/wire"
)

// claims are the node ids and addresses already spoken for: by members,
// and by approved joins that wait for their turn (two approvals must not
// hand out one address just because neither node is a member yet).
type claims struct {
	tx      *store.Tx
	self    string            // the join being approved
	nodes   map[string]string // node id -> who holds it
	addrs   map[string]string // canonical IP -> what it is of whom
	members []cluster.Member
}

func loadClaims(tx *store.Tx, self string, d *cluster.Decoded) (claims, error) {
	c := claims{tx: tx, self: self, nodes: map[string]string{}, addrs: map[string]string{}}
	// The members as decoded records: shared, read only.
	members, err := d.Members(tx)
	if err != nil {
		return c, err
	}
	c.members = members
	for _, m := range members {
		c.add("member "+m.NodeID, m.NodeID, m.MgmtIP, m.Networks)
	}
	return c, nil
}

// without is c as it is once member nodeID is gone (a replacement checks
// the new node against the cluster without the one it replaces).
func (c claims) without(nodeID string) claims {
	out := claims{tx: c.tx, self: c.self, nodes: map[string]string{}, addrs: map[string]string{}}
	for _, m := range c.members {
		if m.NodeID != nodeID {
			out.members = append(out.members, m)
			out.add("member "+m.NodeID, m.NodeID, m.MgmtIP, m.Networks)
		}
	}
	return out
}

// nodeHolder names who holds nodeID: a member, or a queued join (from
// the claims index, without decoding the queue).
func (c *claims) nodeHolder(nodeID string) (string, bool) {
	if who, taken := c.nodes[nodeID]; taken {
		return who, true
	}
	if id := claimedBy(c.tx, "n/"+nodeID, c.self); id != "" {
		return "approved join " + id, true
	}
	return "", false
}

// addrHolder says what ip already is, and of whom.
func (c *claims) addrHolder(ip string) (string, bool) {
	if what, taken := c.addrs[ip]; taken {
		return what, true
	}
	if ip == "" {
		return "", false
	}
	if id := claimedBy(c.tx, "a/"+ip, c.self); id != "" {
		return "an address of approved join " + id, true
	}
	return "", false
}

func (c *claims) add(who, nodeID, mgmtIP string, nets map[string]wire.Network) {
	if _, taken := c.nodes[nodeID]; !taken {
		c.nodes[nodeID] = who
	}
	c.claimAddr(normalIPOrEmpty(mgmtIP), "the management address of "+who)
	for class, n := range nets {
		c.claimAddr(normalIPOrEmpty(n.IP), fmt.Sprintf("the %s address of %s", class, who))
	}
}

func (c *claims) claimAddr(ip, what string) {
	if _, taken := c.addrs[ip]; ip != "" && !taken {
		c.addrs[ip] = what
	}
}

// newNodeID draws an id no member or approved join holds.
func (c *claims) newNodeID() (string, error) {
	for range 16 {
		id := crypto.RandomID("n-", 8)
		if _, taken := c.nodeHolder(id); !taken {
			return id, nil
		}
	}
	return "", fmt.Errorf("no free node id after 16 draws")
}

// refusals lists every way a assignment conflicts with the cluster: taken
// ids and addresses, a traffic class the cluster binds that this node
// leaves out (its traffic would fall silently onto the management plane),
// and a rack missing where members declare racks (a half-declared topology).
func (c *claims) refusals(a wire.Assignment) apierr.Fields {
	var f apierr.Fields
	if who, taken := c.nodeHolder(a.NodeID); taken {
		f.Add("nodeId", "%s is already held by %s", a.NodeID, who)
	}
	if what, taken := c.addrHolder(a.MgmtIP); taken {
		f.Add("mgmtIp", "%s is already %s", a.MgmtIP, what)
	}
	classes := make([]string, 0, len(a.Networks))
	for class := range a.Networks {
		classes = append(classes, class)
	}
	sort.Strings(classes)
	for _, class := range classes {
		ip := a.Networks[class].IP
		if what, taken := c.addrHolder(normalIPOrEmpty(ip)); taken {
			f.Add("networks."+class+".ip", "%s is already %s", ip, what)
		}
	}
	bound := map[string]string{}
	rackedBy := ""
	for _, m := range c.members {
		for class := range m.Networks {
			if _, seen := bound[class]; !seen {
				bound[class] = m.NodeID
			}
		}
		if rackedBy == "" && m.Labels["topology.rack"] != "" {
			rackedBy = m.NodeID
		}
	}
	for _, class := range cluster.TrafficClasses {
		holder, isBound := bound[class]
		if _, has := a.Networks[class]; isBound && !has {
			f.Add("networks."+class, "the cluster binds %s (member %s has it); without it this node's %s traffic would fall onto the management plane", class, holder, class)
		}
	}
	if rackedBy != "" && a.Labels["topology.rack"] == "" {
		f.Add("labels.topology.rack", "members declare topology.rack (member %s has one); this node must too, or the topology is half-declared", rackedBy)
	}
	return f
}
