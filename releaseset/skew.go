package releaseset

import (
	"cmp"
	"slices"
	"stratum/wire"
	"strconv"
	"strings"
)

// fieldValue is one node's value of a skew field: what is compared, and
// how a person reads it.
type fieldValue struct{ value, display string }

// unknown is the value of a field a node's record does not carry.
var unknown = fieldValue{"unknown", "unknown"}

// notApplicable is the value of a field that does not apply to a node:
// a node that runs no control plane (a worker) has no control plane
// build or schema. It is left out of the comparison: not skew.
var notApplicable = fieldValue{"n/a", "not applicable"}

// absent is the value of a package component a node does not have.
var absent = fieldValue{"absent", "absent"}

// skewField is one of the fixed skew fields and how to read it.
type skewField struct {
	name string
	of   func(*wire.Record) fieldValue
}

// fixedFields are compared in this order, before the packages.
var fixedFields = []skewField{
	{wire.SkewOS, osValue},
	{wire.SkewImageMode, imageModeValue},
	{wire.SkewKernel, kernelValue},
	{wire.SkewControlPlane, controlPlaneValue},
	{wire.SkewSchema, schemaValue},
	{wire.SkewHostBinaries, hostBinariesValue},
	{wire.SkewExtensions, extensionsValue},
}

// runningValue is a node's runningRelease as a skew value.
func runningValue(running string) fieldValue {
	if running == "" {
		return unknown
	}
	return fieldValue{running, running}
}

// osValue: on an image-mode node, the booted image's manifest digest, shown
// as os.imageVersion (else the deployment's version label); two builds
// with one version label still differ. Otherwise os.prettyName, else
// "id versionId".
func osValue(r *wire.Record) fieldValue {
	if r.ImageMode && r.Bootc != nil && r.Bootc.Booted != nil && r.Bootc.Booted.Digest != "" {
		b := r.Bootc.Booted
		display := b.Digest
		if r.OS != nil && r.OS.ImageVersion != "" {
			display = r.OS.ImageVersion
		} else if b.Version != "" {
			display = b.Version
		}
		return fieldValue{b.Digest, display}
	}
	if r.OS == nil {
		return unknown
	}
	if r.OS.PrettyName != "" {
		return fieldValue{r.OS.PrettyName, r.OS.PrettyName}
	}
	if s := strings.TrimSpace(r.OS.ID + " " + r.OS.VersionID); s != "" {
		return fieldValue{s, s}
	}
	return unknown
}

// imageModeValue is what the host has (SPEC 17): an image, or packages
// and the package manager found.
func imageModeValue(r *wire.Record) fieldValue {
	if r.ImageMode {
		return fieldValue{"true", "image"}
	}
	if r.PackageManager != "" {
		return fieldValue{"false", "package (" + r.PackageManager + ")"}
	}
	return fieldValue{"false", "package"}
}

func kernelValue(r *wire.Record) fieldValue {
	if r.OS == nil || r.OS.Kernel == "" {
		return unknown
	}
	return fieldValue{r.OS.Kernel, r.OS.Kernel}
}

// controlPlaneValue compares the commit and shows the version.
func controlPlaneValue(r *wire.Record) fieldValue {
	c := r.ControlPlane
	if c == nil {
		return notApplicable
	}
	if c.Commit == "" {
		return unknown
	}
	return fieldValue{c.Commit, cmp.Or(c.Version, c.Commit)}
}

// schemaValue is controlPlane.schemaLevel: the migrations a build carries
// decide whether two control planes can share a database.
func schemaValue(r *wire.Record) fieldValue {
	if r.ControlPlane == nil {
		return notApplicable
	}
	if r.ControlPlane.SchemaLevel == nil {
		return unknown
	}
	s := strconv.Itoa(*r.ControlPlane.SchemaLevel)
	return fieldValue{s, s}
}

// hostBinariesValue compares the commit ("mixed" and "unknown" included).
func hostBinariesValue(r *wire.Record) fieldValue {
	if r.HostBinaries == nil || r.HostBinaries.Commit == "" {
		return unknown
	}
	return fieldValue{r.HostBinaries.Commit, r.HostBinaries.Commit}
}

// extensionsValue is the set of merged name@version, sorted and joined by
// ","; "none" when nothing is merged. Extensions found but not merged do
// not change what runs, so they do not count.
func extensionsValue(r *wire.Record) fieldValue {
	var merged []string
	for _, e := range r.Extensions {
		if e.Merged {
			merged = append(merged, e.Name+"@"+e.Version)
		}
	}
	if len(merged) == 0 {
		return fieldValue{"none", "none"}
	}
	slices.Sort(merged)
	merged = slices.Compact(merged)
	s := strings.Join(merged, ",")
	return fieldValue{s, s}
}

// packageValue is name@version of the node's package for component, or
// "absent".
func packageValue(r *wire.Record, component string) fieldValue {
	for _, p := range r.Packages {
		if p.Component == component {
			s := p.Name + "@" + p.Version
			return fieldValue{s, s}
		}
	}
	return absent
}

// group gathers the nodes by value. Values are ordered by how many nodes
// have them, most first, so the odd one out comes last; ties keep the
// order in which members first show them. ok is false when all agree.
func group(field string, ids []string, vals []fieldValue) (wire.Skew, bool) {
	at := map[string]int{}
	var values []wire.SkewValue
	for i, id := range ids {
		if vals[i] == notApplicable {
			continue
		}
		j, seen := at[vals[i].value]
		if !seen {
			j = len(values)
			at[vals[i].value] = j
			values = append(values, wire.SkewValue{Value: vals[i].value, Display: vals[i].display})
		}
		values[j].Nodes = append(values[j].Nodes, id)
	}
	if len(values) < 2 {
		return wire.Skew{}, false
	}
	slices.SortStableFunc(values, func(a, b wire.SkewValue) int {
		return cmp.Compare(len(b.Nodes), len(a.Nodes))
	})
	disambiguate(values)
	return wire.Skew{Field: field, Values: values}, true
}

// disambiguate appends the value to any display that two values share
// (two OS builds with one version label), so the readable forms differ
// whenever the values do.
func disambiguate(values []wire.SkewValue) {
	count := map[string]int{}
	for _, v := range values {
		count[v.Display]++
	}
	for i, v := range values {
		if count[v.Display] > 1 && v.Display != v.Value {
			values[i].Display = v.Display + " (" + shortValue(v.Value) + ")"
		}
	}
}

// shortValue shortens a digest to its first 12 hex digits.
func shortValue(v string) string {
	if isDigest(v) {
		return v[:len("sha256:")+12]
	}
	return v
}

// components is the sorted union of the package components of recs.
func components(recs []*wire.Record) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		for _, p := range r.Packages {
			if !seen[p.Component] {
				seen[p.Component] = true
				out = append(out, p.Component)
			}
		}
	}
	slices.Sort(out)
	return out
}
