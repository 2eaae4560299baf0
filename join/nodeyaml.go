package join

import (
	"go.yaml.in/yaml/v3"

	"stratum/cluster"
	"stratum/wire"
)

// nodeYAML is the node's node.yaml, from its assignment and the cluster.
type nodeYAML struct {
	NodeID       string                  `yaml:"nodeId"`
	ClusterID    string                  `yaml:"clusterId"`
	Role         string                  `yaml:"role"`
	AZ           string                  `yaml:"az"`
	Mgmt         nodeYAMLMgmt            `yaml:"mgmt"`
	Networks     map[string]wire.Network `yaml:"networks"`
	Labels       map[string]string       `yaml:"labels"`
	ParentDomain string                  `yaml:"parentDomain"`
	Region       string                  `yaml:"region"`
	DNS          nodeYAMLDNS             `yaml:"dns"`
}

type nodeYAMLMgmt struct {
	Address string `yaml:"address"`
}

type nodeYAMLDNS struct {
	UpstreamServers []string `yaml:"upstream_servers"`
}

func renderNodeYAML(id cluster.Identity, role string, a wire.Assignment) (string, error) {
	dns := id.DNSUpstreamServers
	if dns == nil {
		dns = []string{}
	}
	b, err := yaml.Marshal(nodeYAML{
		NodeID: a.NodeID, ClusterID: id.ClusterID, Role: role, AZ: a.AZ,
		Mgmt:     nodeYAMLMgmt{Address: a.MgmtIP},
		Networks: orEmpty(a.Networks), Labels: orEmpty(a.Labels),
		ParentDomain: id.ParentDomain, Region: id.Region,
		DNS: nodeYAMLDNS{UpstreamServers: dns},
	})
	return string(b), err
}
