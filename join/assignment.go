package join

import (
	"regexp"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/strictjson"
	"stratum/wire"
)

var azPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// DecodeAssignment decodes an approval body strictly: unknown fields are
// named at every depth (networks.storage.ipp), and every malformed value
// is listed with them. An empty body takes every default.
func DecodeAssignment(body []byte) (wire.Assignment, error) {
	var a wire.Assignment
	if err := strictjson.DecodeChecked(strictjson.OrEmptyObject(body), &a, "the assignment has problems", func() apierr.Fields { return assignmentProblems(a) }); err != nil {
		return wire.Assignment{}, err
	}
	return a, nil
}

// problems lists every malformed value, independent of the cluster.
func assignmentProblems(a wire.Assignment) apierr.Fields {
	var f apierr.Fields
	if a.NodeID != "" && !cluster.ValidNodeID(a.NodeID) {
		f.Add("nodeId", "must be n- followed by 8 of [a-z0-9]")
	}
	if a.AZ != "" && !azPattern.MatchString(a.AZ) {
		f.Add("az", "must be lower-case letters, digits and dashes, at most 63")
	}
	if a.MgmtIP != "" {
		cluster.ValidateIP(&f, "mgmtIp", a.MgmtIP)
	}
	cluster.ValidateNetworks(&f, "networks", a.Networks)
	cluster.ValidateLabels(&f, "labels", a.Labels)
	return f
}

// normalized returns a copy with canonical IP text, so conflicts compare
// addresses, not spellings.
func normalized(a wire.Assignment) wire.Assignment {
	a.MgmtIP = normalIPOrEmpty(a.MgmtIP)
	if a.Networks != nil {
		nets := make(map[string]wire.Network, len(a.Networks))
		for c, n := range a.Networks {
			n.IP = normalIPOrEmpty(n.IP)
			nets[c] = n
		}
		a.Networks = nets
	}
	if a.Labels != nil {
		labels := make(map[string]string, len(a.Labels))
		for k, v := range a.Labels {
			labels[k] = v
		}
		a.Labels = labels
	}
	return a
}
