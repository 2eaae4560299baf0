// Package cluster owns the cluster's identity (id, domain, region, release),
// its CA and secrets, and its membership with the generation counter.
package cluster

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"stratum/apierr"
	"stratum/openbao"
	"stratum/semver"
	"stratum/wire"
)

// FounderConfig describes member 1.
type FounderConfig struct {
	NodeID   string                  `yaml:"nodeId"`
	MgmtIP   string                  `yaml:"mgmtIp"`
	AZ       string                  `yaml:"az"`
	Networks map[string]wire.Network `yaml:"networks"`
	Labels   map[string]string       `yaml:"labels"`
}

// SecretsConfig are the cluster secrets a file may give.
type SecretsConfig struct {
	PostgresPassword    string `yaml:"postgresPassword"`
	OpenBaoToken        string `yaml:"openBaoToken"`
	OpenBaoUnsealKey    string `yaml:"openBaoUnsealKey"`
	AxdnsdEncryptionKey string `yaml:"axdnsdEncryptionKey"`
}

// Config is the cluster file.
type Config struct {
	ParentDomain       string        `yaml:"parentDomain"`
	Region             string        `yaml:"region"`
	ClusterRelease     string        `yaml:"clusterRelease"`
	AdminEmail         string        `yaml:"adminEmail"`
	DNSUpstreamServers *[]string     `yaml:"dnsUpstreamServers"`
	Founder            FounderConfig `yaml:"founder"`
	VIPs               wire.VIPs     `yaml:"vips"`
	Secrets            SecretsConfig `yaml:"secrets"`
	// OpenBao names the cluster's OpenBao and the founder's token file
	// (SPEC 19); absent: no OpenBao, and no bundle carries its tokens.
	OpenBao openbao.Settings `yaml:"openbao"`
}

// DevDefaults is the configuration `serve --dev` initializes with.
func DevDefaults() Config {
	return Config{ParentDomain: "stratum.test", Region: "lab-1", ClusterRelease: "0.1.0", AdminEmail: "admin@stratum.local", Founder: FounderConfig{MgmtIP: "127.0.0.1"}}
}

// ParseConfig decodes a cluster file strictly: an unknown key is an error
// naming it.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return Config{}, fmt.Errorf("cluster file: %w", err)
	}
	if len(root.Content) == 0 {
		return c, nil
	}
	var f apierr.Fields
	unknownKeys(&f, root.Content[0], reflect.TypeOf(c), "")
	if err := f.Err("the cluster file has keys stratum does not know"); err != nil {
		return Config{}, err
	}
	if err := root.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("cluster file: %w", err)
	}
	return c, nil
}

// unknownKeys names every mapping key of n that t has no field for, by
// its path in the file (founder.networks.storage.mask), not by Go type.
func unknownKeys(f *apierr.Fields, n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		if key == "<<" && n.Content[i].Tag == "!!merge" {
			// A merge brings another mapping's keys in: check them here.
			unknownKeys(f, val, t, path)
			continue
		}
		at := key
		if path != "" {
			at = path + "." + key
		}
		switch t.Kind() {
		case reflect.Map:
			unknownKeys(f, val, t.Elem(), at)
		case reflect.Struct:
			ft, ok := yamlField(t, key)
			if !ok {
				f.Add(at, "unknown key")
				continue
			}
			unknownKeys(f, val, ft, at)
		}
	}
}

func yamlField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == key {
			return t.Field(i).Type, true
		}
	}
	return nil, false
}

// LoadConfig reads and parses the cluster file at path.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(b)
}

// Validate lists every problem of a complete configuration.
func (c *Config) Validate(dev bool) error {
	var f apierr.Fields
	if c.ParentDomain == "" && !dev {
		f.Add("parentDomain", "required")
	} else if c.ParentDomain != "" && !validDomain(c.ParentDomain) {
		f.Add("parentDomain", "not a DNS name")
	}
	if c.Region == "" && !dev {
		f.Add("region", "required")
	}
	if c.ClusterRelease != "" {
		if semver.Valid(c.ClusterRelease) != nil {
			f.Add("clusterRelease", "not a semantic version")
		}
	}
	if c.AdminEmail != "" && !strings.Contains(c.AdminEmail, "@") {
		f.Add("adminEmail", "not an email address")
	}
	if c.DNSUpstreamServers != nil {
		for i, s := range *c.DNSUpstreamServers {
			if net.ParseIP(s) == nil {
				f.Add(fmt.Sprintf("dnsUpstreamServers[%d]", i), "not an IP address")
			}
		}
	}
	if c.Founder.NodeID != "" && !ValidNodeID(c.Founder.NodeID) {
		f.Add("founder.nodeId", "must be n- followed by 8 of [a-z0-9]")
	}
	if c.Founder.MgmtIP != "" {
		ValidateIP(&f, "founder.mgmtIp", c.Founder.MgmtIP)
	}
	ValidateNetworks(&f, "founder.networks", c.Founder.Networks)
	ValidateLabels(&f, "founder.labels", c.Founder.Labels)
	for _, v := range []struct{ name, ip string }{
		{"api", c.VIPs.API}, {"postgres", c.VIPs.Postgres}, {"openBao", c.VIPs.OpenBao}, {"ovnNb", c.VIPs.OvnNb},
		{"ovnSb", c.VIPs.OvnSb}, {"vmselect", c.VIPs.Vmselect}, {"floatingNextHop", c.VIPs.FloatingNextHop},
	} {
		if v.ip != "" {
			ValidateIP(&f, "vips."+v.name, v.ip)
		}
	}
	c.OpenBao.Problems(&f, "openbao")
	if k := c.Secrets.AxdnsdEncryptionKey; k != "" && !isHex64(k) {
		f.Add("secrets.axdnsdEncryptionKey", "must be 64 hex characters")
	}
	return f.Err("the cluster file has problems")
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}
