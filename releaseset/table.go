package releaseset

import (
	"cmp"
	"fmt"
	"io"
	"stratum/wire"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes s for a person (`stratum release-set`): a header line,
// a table with one row per field and one column per node, a "*" before
// each row whose values differ between the recent nodes, then the drift
// list and a summary line. members is how many nodes the set has
// (s.Nodes may be a page of them).
//
// Cells of a stale node show its last record; the "record" row says so.
// Only recent nodes count for the "*" mark, as for summary.skew.
func WriteTable(w io.Writer, s wire.ReleaseSet, members int) error {
	ew := &errWriter{w: w}
	cp := s.ControlPlane
	fmt.Fprintf(ew, "release set from %s, control plane %s", cmp.Or(s.Node, "?"), cmp.Or(cp.Version, "?"))
	if cp.Commit != "" && cp.Commit != cp.Version {
		fmt.Fprintf(ew, " (%s)", cp.Commit)
	}
	if cp.SchemaLevel != nil {
		fmt.Fprintf(ew, ", schema %d", *cp.SchemaLevel)
	}
	fmt.Fprintln(ew)

	tw := tabwriter.NewWriter(ew, 0, 8, 2, ' ', 0)
	row := func(mark, name string, cell func(wire.SetNode) string) {
		cells := []string{mark, name}
		for _, n := range s.Nodes {
			cells = append(cells, cell(n))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	skewed := map[string]wire.Skew{}
	for _, sk := range s.Summary.Skew {
		skewed[sk.Field] = sk
	}
	mark := func(field string) string {
		if _, differs := skewed[field]; differs {
			return "*"
		}
		return " "
	}
	row(" ", "FIELD", func(n wire.SetNode) string { return n.NodeID })
	row(" ", "hostname", func(n wire.SetNode) string { return cmp.Or(n.Hostname, "-") })
	row(" ", "record", recordState)
	row(mark(wire.SkewRunningRelease), "runningRelease", func(n wire.SetNode) string {
		if !n.Recorded {
			return "-"
		}
		r := cmp.Or(n.RunningRelease, "unknown")
		if n.Behind {
			r += " (behind)"
		}
		return r
	})
	field := func(name string, of func(*wire.Record) fieldValue) {
		sk := skewed[name]
		row(mark(name), name, func(n wire.SetNode) string {
			if n.Release == nil {
				return "-"
			}
			return cellDisplay(sk, n.NodeID, of(n.Release))
		})
	}
	for _, f := range fixedFields {
		field(f.name, f.of)
	}
	var recs []*wire.Record
	for _, n := range s.Nodes {
		if n.Release != nil {
			recs = append(recs, n.Release)
		}
	}
	for _, c := range components(recs) {
		field(wire.SkewPackagePrefix+c, func(r *wire.Record) fieldValue { return packageValue(r, c) })
	}
	tw.Flush()

	fmt.Fprintln(ew)
	if len(s.Summary.Drift) == 0 {
		fmt.Fprintln(ew, "drift: none")
	} else {
		fmt.Fprintf(ew, "drift (%d):\n", len(s.Summary.Drift))
		tw = tabwriter.NewWriter(ew, 0, 8, 2, ' ', 0)
		for _, d := range s.Summary.Drift {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.NodeID, d.Kind, driftText(d))
		}
		tw.Flush()
	}
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, summaryLine(s, members))
	return ew.err
}

// recordState is "recent", "stale" or "never".
func recordState(n wire.SetNode) string {
	switch {
	case !n.Recorded:
		return "never"
	case n.Stale:
		return "stale"
	}
	return "recent"
}

// cellDisplay uses the skew's display for the node when the field is
// skewed (it may be disambiguated), else the value's own.
func cellDisplay(sk wire.Skew, id string, v fieldValue) string {
	for _, sv := range sk.Values {
		if sv.Value == v.value {
			return sv.Display
		}
	}
	return v.display
}

// driftText is one finding in words.
func driftText(d wire.Drift) string {
	switch {
	case d.Kind == wire.DriftReport && d.Recorded != nil && !*d.Recorded:
		return "never recorded its release"
	case d.Kind == wire.DriftReport && d.RecordedAt != nil:
		return "record is stale, last recorded " + d.RecordedAt.UTC().Format(time.RFC3339)
	case d.Kind == wire.DriftReport:
		return "record is stale"
	case d.Field == "hostBinaries":
		return fmt.Sprintf("hostBinaries: commit %s, want %s (%s)", cmp.Or(d.Commit, "?"), cmp.Or(d.Want, "unknown"), cmp.Or(string(d.Source), "?"))
	case d.Field == "bootc.staged":
		return fmt.Sprintf("bootc.staged: %s (%s) staged for the next boot", cmp.Or(d.Image, "?"), cmp.Or(d.Version, shortValue(d.Digest)))
	case d.Kind == wire.DriftPin && d.Name != "":
		return fmt.Sprintf("%s %s: pinned %s, running %s%s", d.Field, d.Name,
			cmp.Or(shortRef(d.Pinned), "-"), cmp.Or(shortRef(d.Running), "?"), containers(d.Containers))
	case d.Kind == wire.DriftPin:
		return fmt.Sprintf("%s %s: no pin names it%s", d.Field, cmp.Or(shortRef(d.Image), "?"), containers(d.Containers))
	}
	return d.Field
}

// shortRef shortens the digest of an image reference (name@sha256:...)
// so that a drift line fits a terminal.
func shortRef(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 && isDigest(ref[i+1:]) {
		return ref[:i+1] + shortValue(ref[i+1:])
	}
	return ref
}

func containers(n *int) string {
	switch {
	case n == nil:
		return ""
	case *n == 1:
		return " (1 container)"
	}
	return fmt.Sprintf(" (%d containers)", *n)
}

// HeadLine is the release set in one line for a person or a script
// (SPEC 17), e.g. "3 nodes; admission 0.2.0; behind: n-abc12def (0.1.0);
// skew: kernel". members is how many nodes the set has (s.Nodes may be a
// page of them); who is behind comes from the summary, which covers
// every node.
func HeadLine(s wire.ReleaseSet, members int) string {
	var behind, skew []string
	for i, b := range s.Summary.Behind {
		if i == headLineBehind {
			behind = append(behind, fmt.Sprintf("and %d more", s.Summary.BehindCount-i))
			break
		}
		behind = append(behind, fmt.Sprintf("%s (%s)", b.NodeID, cmp.Or(b.RunningRelease, "unknown")))
	}
	if len(s.Summary.Behind) < s.Summary.BehindCount && len(s.Summary.Behind) <= headLineBehind {
		behind = append(behind, fmt.Sprintf("and %d more", s.Summary.BehindCount-len(s.Summary.Behind)))
	}
	for _, sk := range s.Summary.Skew {
		skew = append(skew, sk.Field)
	}
	none := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	}
	return fmt.Sprintf("%s; admission %s; behind: %s; skew: %s", plural(members, "node", "nodes"), cmp.Or(s.AdmissionRelease, "unknown"), none(behind), none(skew))
}

// headLineBehind is how many nodes behind HeadLine names.
const headLineBehind = 10

// Healthy: consistent, which includes nobody behind (`stratum
// release-set --check`).
func Healthy(s wire.ReleaseSet) bool {
	return s.Summary.Consistent && s.Summary.BehindCount == 0
}

// summaryLine is e.g. "3 nodes, 2 recent, running release 0.2.0: not
// consistent (1 skewed field, 2 drift findings, 1 node behind)".
func summaryLine(s wire.ReleaseSet, members int) string {
	line := fmt.Sprintf("%s, %d recent, running release %s: ",
		plural(members, "node", "nodes"), s.Summary.Recent, cmp.Or(s.RunningRelease, "unknown"))
	if s.Summary.Consistent {
		return line + "consistent"
	}
	line += fmt.Sprintf("not consistent (%s, %s",
		plural(len(s.Summary.Skew), "skewed field", "skewed fields"),
		plural(len(s.Summary.Drift), "drift finding", "drift findings"))
	if s.Summary.BehindCount > 0 {
		line += fmt.Sprintf(", %s behind %s", plural(s.Summary.BehindCount, "node", "nodes"), cmp.Or(s.AdmissionRelease, "the admission release"))
	}
	return line + ")"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// errWriter keeps the first write error so the table code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
