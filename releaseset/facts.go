package releaseset

import (
	"hash/maphash"
	"slices"
	"stratum/wire"
	"strings"
	"sync"
	"time"
)

// facts is what the summary reads of one node's record: its value of each
// skew field and its host and pin drift. It is computed once per record,
// so a summary of a large cluster groups values instead of reading every
// record again, and it holds no part of the record itself.
type facts struct {
	// fixed holds one value per fixedFields, in that order.
	fixed []fieldValue
	// pkgs is the node's value of each package component it has, sorted by
	// component (the first package of a component counts, as packageValue
	// reads it).
	pkgs []pkgFact
	// drift are the node's host and pin findings, in the order summarize lists them.
	drift []wire.Drift
}

type pkgFact struct {
	component string
	value     fieldValue
}

// factsOf reads rec's facts; strings are shared through in when it is
// not nil.
func factsOf(id string, rec *wire.Record, in *interner) *facts {
	f := &facts{fixed: make([]fieldValue, len(fixedFields))}
	for k, field := range fixedFields {
		f.fixed[k] = in.value(field.of(rec))
	}
	// Sorted by component, stably, so the first package of each
	// component (packageValue's) leads its run and the others are
	// dropped.
	f.pkgs = make([]pkgFact, 0, len(rec.Packages))
	for _, p := range rec.Packages {
		v := in.nameAt(p.Name, p.Version)
		f.pkgs = append(f.pkgs, pkgFact{in.string(p.Component), fieldValue{v, v}})
	}
	in.sortPkgs(f.pkgs)
	f.pkgs = slices.CompactFunc(f.pkgs, func(a, b pkgFact) bool { return a.component == b.component })
	// Most nodes have the same values: they share one list of each.
	if in != nil {
		f.fixed = internList(in, &in.fixed, f.fixed, func(h *maphash.Hash, v fieldValue) { h.WriteString(v.value) })
		f.pkgs = internList(in, &in.pkgs, f.pkgs, func(h *maphash.Hash, p pkgFact) { h.WriteString(p.component); h.WriteString(p.value.value) })
	}
	f.drift = appendPinDrift(appendHostDrift(nil, id, rec), id, rec)
	for i := range f.drift {
		in.drift(&f.drift[i])
	}
	return f
}

// summaryNode is one member as the summary sees it.
type summaryNode struct {
	id         string
	recorded   bool
	stale      bool
	recordedAt time.Time
	facts      *facts
	// running is the release the node runs as nodes[] shows it (its own,
	// else the cluster's), behind whether it is older than the admission
	// release.
	running string
	behind  bool
}

// summarize derives the summary from the members in join order.
func summarize(nodes []summaryNode) wire.SetSummary {
	var recent []*summaryNode
	drift := []wire.Drift{}
	for i := range nodes {
		n := &nodes[i]
		if !n.recorded || n.stale {
			d := wire.Drift{NodeID: n.id, Kind: wire.DriftReport, Recorded: ptr(n.recorded), Stale: ptr(n.stale)}
			if n.stale {
				d.RecordedAt = ptr(n.recordedAt)
			}
			drift = append(drift, d)
			continue
		}
		recent = append(recent, n)
		drift = append(drift, n.facts.drift...)
	}
	s := wire.SetSummary{Recent: len(recent), Skew: skewOfFacts(recent), Drift: drift, Behind: []wire.BehindNode{}}
	for i := range nodes {
		if n := &nodes[i]; n.behind {
			if s.BehindCount < wire.MaxBehindListed {
				s.Behind = append(s.Behind, wire.BehindNode{NodeID: n.id, RunningRelease: n.running})
			}
			s.BehindCount++
		}
	}
	// With no members nothing is known, which is not "consistent"; nodes
	// on different releases, or behind the one joiners are admitted on,
	// are not either (the seed: no field differs).
	s.Consistent = len(nodes) > 0 && len(recent) == len(nodes) && len(s.Skew) == 0 && len(s.Drift) == 0 && s.BehindCount == 0
	return s
}

// skewOfFacts compares the recent nodes field by field, in the order of
// SPEC section 6, and keeps the fields with more than one value.
func skewOfFacts(nodes []*summaryNode) []wire.Skew {
	out := []wire.Skew{}
	if len(nodes) < 2 {
		return out
	}
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.id
	}
	vals := make([]fieldValue, len(nodes))
	add := func(field string) {
		if s, ok := group(field, ids, vals); ok {
			out = append(out, s)
		}
	}
	// The release each node runs comes first: it is what an upgrade
	// changes, and what the operator reads first.
	for i, n := range nodes {
		vals[i] = runningValue(n.running)
	}
	add(wire.SkewRunningRelease)
	for k, f := range fixedFields {
		for i, n := range nodes {
			vals[i] = n.facts.fixed[k]
		}
		add(f.name)
	}
	// Components in sorted order; each node's packages are sorted too, so
	// one cursor per node walks them.
	var comps []string
	seen := map[string]bool{}
	for _, n := range nodes {
		for _, p := range n.facts.pkgs {
			if !seen[p.component] {
				seen[p.component] = true
				comps = append(comps, p.component)
			}
		}
	}
	slices.Sort(comps)
	cursor := make([]int, len(nodes))
	for _, c := range comps {
		for i, n := range nodes {
			pk := n.facts.pkgs
			for cursor[i] < len(pk) && pk[cursor[i]].component < c {
				cursor[i]++
			}
			if cursor[i] < len(pk) && pk[cursor[i]].component == c {
				vals[i] = pk[cursor[i]].value
			} else {
				vals[i] = absent
			}
		}
		add(wire.SkewPackagePrefix + c)
	}
	return out
}

// sortPkgs sorts pk by component, stably. The order the last record
// took is tried first (in one pass): the nodes of a fleet list their
// packages in one order, and sorting them was a third of a record's
// facts.
func (in *interner) sortPkgs(pk []pkgFact) {
	byComponent := func(a, b pkgFact) int { return strings.Compare(a.component, b.component) }
	if in == nil || len(pk) > maxPermLen {
		slices.SortStableFunc(pk, byComponent)
		return
	}
	in.mu.Lock()
	perm := in.perm // never changed once kept
	in.mu.Unlock()
	var buf [maxPermLen]pkgFact
	sorted := buf[:len(pk)]
	if len(perm) == len(pk) {
		ok := true
		for i, k := range perm {
			sorted[i] = pk[k]
			if i > 0 {
				if c := byComponent(sorted[i-1], sorted[i]); c > 0 || c == 0 && perm[i-1] > k {
					ok = false
					break
				}
			}
		}
		if ok {
			copy(pk, sorted)
			return
		}
	}
	perm = make([]uint8, len(pk))
	for i := range perm {
		perm[i] = uint8(i)
	}
	slices.SortStableFunc(perm, func(a, b uint8) int { return byComponent(pk[a], pk[b]) })
	for i, k := range perm {
		sorted[i] = pk[k]
	}
	copy(pk, sorted)
	in.mu.Lock()
	in.perm = perm
	in.mu.Unlock()
}

// maxPermLen: longer package lists are sorted each time.
const maxPermLen = 64

// interner shares equal strings between the facts of many records: at
// 100,000 nodes nearly every value repeats. It stops adding beyond
// internLimit strings (values nodes send are bounded, not trusted).
type interner struct {
	mu sync.Mutex
	m  map[string]string
	// fixed and pkgs share equal lists of facts between nodes.
	fixed, pkgs lists
	// perm is the order the last record's packages were sorted in
	// (sortPkgs).
	perm   []uint8
	seed   maphash.Seed
	seeded bool
}

// lists are the shared lists of one kind, by hash; n counts their
// elements, at most listLimit (records are bounded, not trusted).
type lists struct {
	m map[uint64][]any
	n int
}

// internList returns the list equal to l that in already holds, else
// keeps l (up to listLimit elements in all) and returns it. Lists are never
// changed once made.
func internList[T comparable](in *interner, ls *lists, l []T, hash func(*maphash.Hash, T)) []T {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.seeded {
		in.seed, in.seeded = maphash.MakeSeed(), true
	}
	var h maphash.Hash
	h.SetSeed(in.seed)
	for _, v := range l {
		hash(&h, v)
		h.WriteByte(0)
	}
	sum := h.Sum64()
	for _, c := range ls.m[sum] {
		if c := c.([]T); slices.Equal(c, l) {
			return c
		}
	}
	if ls.n+len(l) <= listLimit {
		if ls.m == nil {
			ls.m = map[uint64][]any{}
		}
		l = slices.Clip(l)
		ls.m[sum] = append(ls.m[sum], l)
		ls.n += len(l)
	}
	return l
}

const internLimit = 1 << 18

// listLimit bounds the elements of the lists an interner shares.
const listLimit = 1 << 20

func (in *interner) string(s string) string {
	if in == nil {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	if in.m == nil {
		in.m = map[string]string{}
	}
	// A record's strings may be parts of its whole request body
	// (strictjson.DecodeCheckedCanonical): what is kept is a copy.
	s = strings.Clone(s)
	if len(in.m) < internLimit {
		in.m[s] = s
	}
	return s
}

// drift shares the strings a finding takes from its record (and so
// keeps copies of them, not parts of the record's body).
func (in *interner) drift(d *wire.Drift) {
	for _, s := range [...]*string{&d.Commit, &d.Want, &d.Image, &d.Digest, &d.Version, &d.Name, &d.Pinned, &d.Running} {
		*s = in.string(*s)
	}
	d.Source = wire.HostSource(in.string(string(d.Source)))
}

// nameAt is in.string(name + "@" + version), made without a string
// when in already holds it (a package's value: 30 a record).
func (in *interner) nameAt(name, version string) string {
	var buf [128]byte
	b := append(append(append(buf[:0], name...), '@'), version...)
	if in == nil {
		return string(b)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	s := string(b)
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < internLimit {
		in.m[s] = s
	}
	return s
}

func (in *interner) value(v fieldValue) fieldValue {
	v.value = in.string(v.value)
	if v.display == v.value {
		v.display = v.value
	} else {
		v.display = in.string(v.display)
	}
	return v
}
