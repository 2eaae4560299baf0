package cluster

import (
	"net"
	"regexp"
	"sort"
	"strings"

	"stratum/apierr"
	"stratum/wire"
)

var (
	nodeIDPattern    = regexp.MustCompile(`^n-[a-z0-9]{8}$`)
	domainLabel      = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	labelNamespace   = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)
	labelKeyName     = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
	interfacePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,15}$`)
)

// TrafficClasses are the classes a node may bind to its own address.
var TrafficClasses = []string{"storage", "overlay"}

// ValidNodeID reports whether id is n- plus 8 of [a-z0-9].
func ValidNodeID(id string) bool { return nodeIDPattern.MatchString(id) }

func validDomain(d string) bool {
	if len(d) > 253 {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if !domainLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// ValidateIP records a problem when s is not a bare IP (a CIDR is refused
// with its own message, the most common slip).
func ValidateIP(f *apierr.Fields, field, s string) {
	if net.ParseIP(s) != nil {
		return
	}
	if _, _, err := net.ParseCIDR(s); err == nil {
		f.Add(field, "must be a bare IP address, not a CIDR")
		return
	}
	f.Add(field, "not an IP address")
}

// ValidateNetworks checks traffic-class bindings.
func ValidateNetworks(f *apierr.Fields, field string, nets map[string]wire.Network) {
	for _, class := range sortedKeys(nets) {
		n := nets[class]
		at := field + "." + class
		if !isTrafficClass(class) {
			f.Add(at, "unknown traffic class (classes: storage, overlay)")
			continue
		}
		if n.IP == "" {
			f.Add(at+".ip", "required")
		} else {
			ValidateIP(f, at+".ip", n.IP)
		}
		if n.Interface != "" && !interfacePattern.MatchString(n.Interface) {
			f.Add(at+".interface", "not an interface name")
		}
	}
}

// ValidateLabels checks declared label keys: topology.rack, topology.power
// or <namespace>/<key>; topology.az rides its own field.
func ValidateLabels(f *apierr.Fields, field string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		at := field + "." + k
		switch {
		case k == "topology.az":
			f.Add(at, "the availability zone rides the az field, not a label")
		case k == "topology.rack" || k == "topology.power":
		case strings.Count(k, "/") == 1:
			ns, name, _ := strings.Cut(k, "/")
			if !labelNamespace.MatchString(ns) || !labelKeyName.MatchString(name) {
				f.Add(at, "label key must be topology.rack, topology.power or <namespace>/<key>")
			}
		default:
			f.Add(at, "label key must be topology.rack, topology.power or <namespace>/<key>")
		}
		if len(labels[k]) > 63 {
			f.Add(at, "label value longer than 63 characters")
		}
	}
}

func isTrafficClass(c string) bool {
	for _, t := range TrafficClasses {
		if c == t {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
