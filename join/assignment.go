package join

import (
	"encoding/json"
	"regexp"
	"sort"

	"stratum/apierr"
	"stratum/cluster"
)

var azPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Assignment is what the operator gives a node when approving it.
type Assignment struct {
	NodeID   string                     `json:"nodeId"`
	AZ       string                     `json:"az"`
	MgmtIP   string                     `json:"mgmtIp"`
	Networks map[string]cluster.Network `json:"networks"`
	Labels   map[string]string          `json:"labels"`
}

// DecodeAssignment decodes an approval body strictly: unknown fields are
// named at every depth (networks.storage.ipp), and every malformed value
// is listed with them.
func DecodeAssignment(body []byte) (Assignment, error) {
	var f apierr.Fields
	var a Assignment
	m, ok := decodeObject(&f, "", body, "nodeId", "az", "mgmtIp", "networks", "labels")
	if ok {
		decodeField(&f, "", m, "nodeId", &a.NodeID, "a string")
		decodeField(&f, "", m, "az", &a.AZ, "a string")
		decodeField(&f, "", m, "mgmtIp", &a.MgmtIP, "a string")
		decodeField(&f, "", m, "labels", &a.Labels, "an object of strings")
		if raw, present := m["networks"]; present {
			a.Networks = decodeNetworks(&f, raw)
		}
		f = append(f, a.problems()...)
	}
	if err := f.Err("the assignment has problems"); err != nil {
		return Assignment{}, err
	}
	return a, nil
}

func decodeNetworks(f *apierr.Fields, raw json.RawMessage) map[string]cluster.Network {
	var classes map[string]json.RawMessage
	if string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, &classes); err != nil {
		f.Add("networks", "must be an object of traffic classes")
		return nil
	}
	out := map[string]cluster.Network{}
	keys := make([]string, 0, len(classes))
	for k := range classes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, class := range keys {
		at := "networks." + class
		m, ok := decodeObject(f, at, classes[class], "ip", "interface")
		if !ok {
			continue
		}
		var n cluster.Network
		decodeField(f, at, m, "ip", &n.IP, "a string")
		decodeField(f, at, m, "interface", &n.Interface, "a string")
		out[class] = n
	}
	return out
}

// problems lists every malformed value, independent of the cluster.
func (a Assignment) problems() apierr.Fields {
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
func (a Assignment) normalized() Assignment {
	a.MgmtIP = normalIPOrEmpty(a.MgmtIP)
	if a.Networks != nil {
		nets := make(map[string]cluster.Network, len(a.Networks))
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
