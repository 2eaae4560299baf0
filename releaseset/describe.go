package releaseset

import (
	"time"

	"stratum/semver"
	"stratum/wire"
)

// RecentWindow is how old a record may be and still count as recent.
const RecentWindow = 10 * time.Minute

// Input is everything Describe needs; the caller reads it from the store.
type Input struct {
	// Now is the time records are aged against; injected so that the
	// logic never reads the clock.
	Now time.Time
	// Node is the answering node (the founder).
	Node string
	// ControlPlane is the answering control plane's own build.
	ControlPlane wire.ControlPlane
	// AdmissionRelease is the release joiners are admitted on ("" when
	// not known): a node running an older one is behind.
	AdmissionRelease string
	// Members are the node ids in join order; duplicates are ignored.
	Members []string
	// Hostnames are the members' host names, by node id.
	Hostnames map[string]string
	// Records are the last record of each node that recorded one. Records
	// of nodes that are not members are ignored.
	Records map[string]Stored
}

// Stored is one node's last record (stored.go: how the store keeps it).
type Stored struct {
	RunningRelease string
	Release        wire.Record
}

// Describe builds the release set. It is pure: the same Input gives the
// same Set.
func Describe(in Input) wire.ReleaseSet {
	members := uniqueMembers(in.Members)
	set := wire.ReleaseSet{
		Node:           in.Node,
		ControlPlane:   in.ControlPlane,
		RunningRelease: RunningRelease(in),
		Nodes:          make([]wire.SetNode, 0, len(members)),
	}
	sum := make([]summaryNode, 0, len(members))
	for _, id := range members {
		n := wire.SetNode{NodeID: id, Hostname: in.Hostnames[id]}
		sn := summaryNode{id: id}
		if st, ok := in.Records[id]; ok {
			rec := st.Release
			n.Recorded = true
			n.Release = &rec
			n.RunningRelease = st.RunningRelease
			n.Stale = in.Now.Sub(rec.RecordedAt) > RecentWindow
			sn.recorded, sn.stale, sn.recordedAt = true, n.Stale, rec.RecordedAt
			if !n.Stale {
				sn.facts = factsOf(id, n.Release, nil)
			}
		}
		// The seed: a node's release is that of its last completed
		// upgrade, "else the cluster's". A node that sent none runs the
		// cluster's.
		if n.RunningRelease == "" {
			n.RunningRelease = set.RunningRelease
		}
		n.Behind = behind(n.RunningRelease, in.AdmissionRelease)
		sn.running, sn.behind = n.RunningRelease, n.Behind
		set.Nodes = append(set.Nodes, n)
		sum = append(sum, sn)
	}
	set.AdmissionRelease = in.AdmissionRelease
	set.Summary = summarize(sum)
	return set
}

// behind: running is a release older than admission (both semver).
func behind(running, admission string) bool {
	return admission != "" && semver.Valid(running) == nil && semver.Valid(admission) == nil && semver.Compare(running, admission) < 0
}

// RunningRelease is the release the cluster runs: the oldest (semver) of
// the members' recorded releases, stale records included (a node that
// stopped reporting still runs what it ran). Empty when none is known.
// /version and the update check use it without building the whole set.
func RunningRelease(in Input) string {
	return oldestRunning(uniqueMembers(in.Members), func(id string) (string, bool) {
		st, ok := in.Records[id]
		return st.RunningRelease, ok
	})
}

// oldestRunning is the oldest valid release that running gives for ids,
// each distinct value checked once (at 100,000 nodes they are a handful).
func oldestRunning(ids []string, running func(id string) (string, bool)) string {
	var oldest string
	checked := map[string]bool{}
	for _, id := range ids {
		r, ok := running(id)
		if !ok || checked[r] {
			continue
		}
		checked[r] = true
		if semver.Valid(r) != nil {
			continue
		}
		if oldest == "" || semver.Compare(r, oldest) < 0 {
			oldest = r
		}
	}
	return oldest
}

// uniqueMembers keeps the first of each id, in order.
func uniqueMembers(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
