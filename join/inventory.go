package join

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"stratum/apierr"
	"stratum/strictjson"
	"stratum/wire"
)

// The inventory of expected machines (zero-touch enrollment): a document
// naming, for each machine, how it is recognised and its full assignment.
// A registration that matches an entry is approved with it without a
// person (autoapprove.go). This file holds the document: decoding and
// every check that needs nothing but the document.

// MaxInventoryEntries bounds a document: a rack is 10 to 100 machines, a
// site a few racks.
const MaxInventoryEntries = 10000

const inventoryProblems = "the inventory has problems"

var hexSHA256 = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// DecodeInventory decodes PUT /v1/admin/inventory strictly (unknown
// fields named at every depth) and lists every problem of the document.
func DecodeInventory(body []byte) (wire.Inventory, error) {
	var doc wire.Inventory
	if err := strictjson.DecodeChecked(body, &doc, inventoryProblems, func() apierr.Fields { return inventoryDocProblems(doc) }); err != nil {
		return wire.Inventory{}, err
	}
	return normalizedInventory(doc), nil
}

// DecodeInventoryDocument decodes an inventory file as a person writes
// it, YAML or JSON (JSON is YAML), with DecodeInventory's rules: the
// YAML is turned into JSON first, so an unknown or misspelt key is named
// the same way in both.
func DecodeInventoryDocument(data []byte) (wire.Inventory, []byte, error) {
	body, err := yamlToJSON(data)
	if err != nil {
		return wire.Inventory{}, nil, err
	}
	doc, err := DecodeInventory(body)
	if err != nil {
		return wire.Inventory{}, nil, err
	}
	return doc, body, nil
}

// yamlToJSON turns one YAML document into JSON. Anchors and aliases are
// refused (a few aliases can stand for an exponential document), as are
// keys that are not plain scalars.
func yamlToJSON(data []byte) ([]byte, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, documentError("not YAML or JSON: %v", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, documentError("more than one YAML document: give one")
	}
	var b bytes.Buffer
	if err := writeJSON(&b, &root, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func documentError(format string, args ...any) error {
	var f apierr.Fields
	f.Add("", format, args...)
	return f.Err(inventoryProblems)
}

const maxYAMLDepth = 32

func writeJSON(b *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxYAMLDepth {
		return documentError("nested deeper than %d levels", maxYAMLDepth)
	}
	if n.Anchor != "" {
		return documentError("line %d: anchors and aliases are not supported", n.Line)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return documentError("an empty document")
		}
		return writeJSON(b, n.Content[0], depth+1)
	case yaml.AliasNode:
		return documentError("line %d: anchors and aliases are not supported", n.Line)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Anchor != "" || (k.Tag != "!!str" && k.ShortTag() != "!!str") {
				return documentError("line %d: a key must be a plain string", k.Line)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			b.Write(key)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(b, n)
	default:
		return documentError("line %d: unsupported YAML", n.Line)
	}
	return nil
}

// writeScalar writes a scalar as JSON by its resolved tag: a string stays
// a string (an unquoted 10.0.0.5 is text), numbers, booleans and null
// keep their kind so the strict decoder names a value of the wrong type.
func writeScalar(b *bytes.Buffer, n *yaml.Node) error {
	var v any
	switch n.ShortTag() {
	case "!!str":
		v = n.Value
	case "!!null":
		b.WriteString("null")
		return nil
	case "!!bool":
		var x bool
		if err := n.Decode(&x); err != nil {
			return documentError("line %d: %v", n.Line, err)
		}
		v = x
	case "!!int":
		var x int64
		if err := n.Decode(&x); err != nil {
			return documentError("line %d: %v", n.Line, err)
		}
		v = x
	case "!!float":
		x, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil {
			v = n.Value // .inf, .nan: no JSON number; the decoder names the field
		} else {
			v = x
		}
	default:
		return documentError("line %d: unsupported YAML tag %s", n.Line, n.ShortTag())
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return documentError("line %d: %v", n.Line, err)
	}
	b.Write(raw)
	return nil
}

// matchKinds lists the kinds of match an entry sets.
func matchKinds(m wire.InventoryMatch) []string {
	var kinds []string
	if m.EKSHA256 != "" {
		kinds = append(kinds, "ekSha256")
	}
	if m.EKCertSHA256 != "" {
		kinds = append(kinds, "ekCertSha256")
	}
	if m.KeyFingerprint != "" {
		kinds = append(kinds, "keyFingerprint")
	}
	return kinds
}

// matchKey is the store key an entry is found under; one per entry.
func matchKey(m wire.InventoryMatch) string {
	switch {
	case m.EKSHA256 != "":
		return "ek:" + strings.ToLower(m.EKSHA256)
	case m.EKCertSHA256 != "":
		return "ekcert:" + strings.ToLower(m.EKCertSHA256)
	default:
		return "key:" + strings.ToLower(m.KeyFingerprint)
	}
}

// inventoryDocProblems lists every problem the document has by itself:
// each entry's match and assignment (checked as an operator's approval
// is), and what two entries may not share.
func inventoryDocProblems(doc wire.Inventory) apierr.Fields {
	var f apierr.Fields
	if doc.Machines == nil {
		f.Add("machines", "required (an empty list clears the inventory)")
		return f
	}
	if len(doc.Machines) > MaxInventoryEntries {
		f.Add("machines", "more than %d entries", MaxInventoryEntries)
		return f
	}
	nodes, addrs, matches := map[string]int{}, map[string]int{}, map[string]int{}
	for i, e := range doc.Machines {
		at := fmt.Sprintf("machines[%d].", i)
		entryProblems(&f, at, e)
		// Duplicates name both entries: the second is the one reported.
		if e.NodeID != "" {
			if j, dup := nodes[e.NodeID]; dup {
				f.Add(at+"nodeId", "%s is also machines[%d]'s node id", e.NodeID, j)
			} else {
				nodes[e.NodeID] = i
			}
		}
		for _, ip := range entryAddrs(e) {
			if j, dup := addrs[ip.addr]; dup {
				f.Add(at+ip.field, "%s is also an address of machines[%d]", ip.addr, j)
			} else {
				addrs[ip.addr] = i
			}
		}
		if len(matchKinds(e.Match)) == 1 {
			k := matchKey(e.Match)
			if j, dup := matches[k]; dup {
				f.Add(at+"match."+matchKinds(e.Match)[0], "machines[%d] has the same match", j)
			} else {
				matches[k] = i
			}
		}
	}
	return f
}

type entryAddr struct{ field, addr string }

// entryAddrs lists an entry's addresses in canonical form with the field
// each comes from (networks by class, sorted).
func entryAddrs(e wire.InventoryEntry) []entryAddr {
	var out []entryAddr
	if ip := normalIPOrEmpty(e.MgmtIP); ip != "" {
		out = append(out, entryAddr{"mgmtIp", ip})
	}
	for _, class := range slices.Sorted(maps.Keys(e.Networks)) {
		if ip := normalIPOrEmpty(e.Networks[class].IP); ip != "" {
			out = append(out, entryAddr{"networks." + class + ".ip", ip})
		}
	}
	return out
}

func entryProblems(f *apierr.Fields, at string, e wire.InventoryEntry) {
	switch kinds := matchKinds(e.Match); len(kinds) {
	case 0:
		f.Add(at+"match", "required: one of ekSha256, ekCertSha256 or keyFingerprint")
	case 1:
		switch kinds[0] {
		case "ekSha256":
			if !hexSHA256.MatchString(e.Match.EKSHA256) {
				f.Add(at+"match.ekSha256", "must be 64 hex digits (SHA-256 of the EK's SubjectPublicKeyInfo)")
			}
		case "ekCertSha256":
			if !hexSHA256.MatchString(e.Match.EKCertSHA256) {
				f.Add(at+"match.ekCertSha256", "must be 64 hex digits (SHA-256 of the EK certificate, DER)")
			}
		case "keyFingerprint":
			hexPart, ok := strings.CutPrefix(e.Match.KeyFingerprint, "sha256:")
			if !ok || !hexSHA256.MatchString(hexPart) {
				f.Add(at+"match.keyFingerprint", "must be sha256: and 64 hex digits, as `stratum joins list` shows the key")
			}
		}
	default:
		f.Add(at+"match", "exactly one of ekSha256, ekCertSha256 or keyFingerprint, not %s", strings.Join(kinds, " and "))
	}
	if e.NodeID == "" {
		f.Add(at+"nodeId", "required")
	}
	if e.Role == "" {
		f.Add(at+"role", "required: one of %s", strings.Join(Roles, ", "))
	} else if !contains(Roles, e.Role) {
		f.Add(at+"role", "must be one of %s", strings.Join(Roles, ", "))
	}
	if e.Hostname != "" && (len(e.Hostname) > maxHostnameLen || !hostnamePattern.MatchString(e.Hostname)) {
		f.Add(at+"hostname", "not a host name")
	}
	if e.MgmtIP == "" {
		f.Add(at+"mgmtIp", "required")
	}
	for _, p := range assignmentProblems(entryAssignment(e)) {
		f.Add(at+p.Field, "%s", p.Message)
	}
}

// entryAssignment is what an entry assigns, as an operator's approval.
func entryAssignment(e wire.InventoryEntry) wire.Assignment {
	return wire.Assignment{NodeID: e.NodeID, AZ: e.AZ, MgmtIP: e.MgmtIP, Networks: e.Networks, Labels: e.Labels}
}

// normalizedInventory canonicalises what entries are compared by: hex in
// lower case, addresses in their canonical text.
func normalizedInventory(doc wire.Inventory) wire.Inventory {
	out := wire.Inventory{Machines: make([]wire.InventoryEntry, 0, len(doc.Machines))}
	for _, e := range doc.Machines {
		e.Match.EKSHA256 = strings.ToLower(e.Match.EKSHA256)
		e.Match.EKCertSHA256 = strings.ToLower(e.Match.EKCertSHA256)
		e.Match.KeyFingerprint = strings.ToLower(e.Match.KeyFingerprint)
		a := normalized(entryAssignment(e))
		e.MgmtIP, e.Networks, e.Labels = a.MgmtIP, orEmpty(a.Networks), orEmpty(a.Labels)
		out.Machines = append(out.Machines, e)
	}
	return out
}
