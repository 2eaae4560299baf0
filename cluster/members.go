package cluster

import (
	"bytes"
	"errors"
	"sort"
	"strconv"
	"time"

	"stratum/store"
	"stratum/wire"
)

const keyGeneration = "generation"

// Member states.
const (
	MemberJoining = "joining"
	MemberActive  = "active"
)

// Member is one node of the cluster as stored: what its view shows
// (wire.MemberView, whose boot fields the prober fills in views and a
// stored member leaves empty) and what only the founder keeps. Hostname
// is what the machine reported when it registered (the founder's own at
// init), so people see names, not only ids.
type Member struct {
	wire.MemberView
	// Order is the join order; the founder is 1.
	Order uint64 `json:"order"`
	// JoinID links a member admitted through a join to it.
	JoinID string `json:"joinId,omitempty"`
	// LeafSerial is the serial (hex) of the transport leaf delivered to
	// this member: the only node certificate the founder accepts for it.
	// Empty for members admitted by a build that did not record it.
	LeafSerial string `json:"leafSerial,omitempty"`
	// NextLeafSerial is the serial of a renewed leaf issued to this
	// member (RenewNodeLeaf) that it has not used yet. Both count until
	// the first request under it promotes it to LeafSerial.
	NextLeafSerial string `json:"nextLeafSerial,omitempty"`
	// Installed is set once the joiner said it persisted its delivery
	// (its join is installing or joined). Before that, its leaf and its
	// release records do not count: a delivery can still be cancelled.
	Installed bool `json:"installed,omitempty"`
	// OpenBaoAccessor is the accessor of the node token minted for this
	// member (SPEC 19), never the token: enough to revoke it.
	OpenBaoAccessor string `json:"openBaoAccessor,omitempty"`
}

// Vouched reports whether the member's own reports count: the founder
// (admitted by init, no join) or a member whose join is installing or
// joined.
func (m Member) Vouched() bool { return m.JoinID == "" || m.Installed }

// Generation returns the current membership generation.
func Generation(tx *store.Tx) uint64 {
	raw := bucketCluster.Get(tx, keyGeneration)
	if raw == nil {
		return 0
	}
	n, _ := strconv.ParseUint(string(raw), 10, 64)
	return n
}

// GenerationMark is the generation as stored, unchecked: two marks of
// one transaction differ when the generation moved between them. It
// spares the members' watchers' check (before and after every join
// transaction) two MAC checks; the generation itself is read by
// Generation.
func GenerationMark(tx *store.Tx) []byte {
	return bytes.Clone(bucketCluster.Stored(tx, keyGeneration))
}

func setGeneration(tx *store.Tx, g uint64) error {
	return bucketCluster.Put(tx, keyGeneration, []byte(strconv.FormatUint(g, 10)))
}

// BumpGeneration increments and returns the generation.
func BumpGeneration(tx *store.Tx) (uint64, error) {
	g := Generation(tx) + 1
	return g, setGeneration(tx, g)
}

// Members lists members in join order.
func Members(tx *store.Tx) ([]Member, error) {
	var out []Member
	err := bucketMembers.ForEach(tx, func(_ string, m Member) error {
		out = append(out, m)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out, err
}

// GetMember reads one member.
func GetMember(tx *store.Tx, nodeID string) (Member, bool, error) {
	return bucketMembers.Get(tx, nodeID)
}

// Decoded keeps the identity and the member records a reader decoded,
// for readers that read them again and again (every registration checks
// its address against the founder's and the VIPs): a record read again
// unchanged, its MAC checked, is not decoded again
// (store.Bucket.GetDecoded). What its methods return may be shared with
// other readers: the caller must not modify it or anything it points to.
// The zero value is ready.
type Decoded struct {
	identity store.Decoded[Identity]
	members  store.Decoded[Member]
}

// Identity is LoadIdentity through d.
func (d *Decoded) Identity(tx *store.Tx) (Identity, error) {
	id, found, err := identity.GetDecoded(tx, &d.identity)
	if err != nil {
		return id, err
	}
	if !found {
		return id, ErrNotInitialized
	}
	return id, nil
}

// Member is GetMember through d.
func (d *Decoded) Member(tx *store.Tx, nodeID string) (Member, bool, error) {
	return bucketMembers.GetDecoded(tx, nodeID, &d.members)
}

// Members is cluster.Members through d: the members in join order,
// decoding only the records that changed since d last read them.
func (d *Decoded) Members(tx *store.Tx) ([]Member, error) {
	var out []Member
	err := bucketMembers.ForEachDecoded(tx, &d.members, func(_ string, m Member) error {
		out = append(out, m)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out, err
}

// AllAppliedIn is cluster.AllAppliedIn through d: every member's report
// of a generation asks it, of the same records.
func (d *Decoded) AllAppliedIn(tx *store.Tx, g uint64) (bool, error) {
	return allAppliedIn(tx, g, func(fn func(string, Member) error) error {
		return bucketMembers.ForEachDecoded(tx, &d.members, fn)
	})
}

// PutMember writes a member.
func PutMember(tx *store.Tx, m Member) error { return bucketMembers.Put(tx, m.NodeID, m) }

// RemoveMember deletes a member.
func RemoveMember(tx *store.Tx, nodeID string) error { return bucketMembers.Delete(tx, nodeID) }

// Admit adds a member in state joining at generation g+1 and applies it on
// the founder at once (the founder applies its own membership changes).
func Admit(tx *store.Tx, m Member, now time.Time) (Member, error) {
	g, err := BumpGeneration(tx)
	if err != nil {
		return m, err
	}
	order, err := bucketMemberOrder.NextSequence(tx)
	if err != nil {
		return m, err
	}
	m.Order = order + 1 // the founder holds 1
	m.State = MemberJoining
	m.Generation = g
	m.JoinedAt = now.UTC()
	if err := PutMember(tx, m); err != nil {
		return m, err
	}
	return m, founderApplies(tx, g)
}

// founderApplies records that the founder applied generation g.
func founderApplies(tx *store.Tx, g uint64) error {
	id, err := LoadIdentity(tx)
	if err != nil {
		return err
	}
	f, found, err := GetMember(tx, id.FounderNodeID)
	if err != nil || !found {
		return err
	}
	if f.AppliedGeneration < g {
		f.AppliedGeneration = g
		return PutMember(tx, f)
	}
	return nil
}

// Remove deletes a member and bumps the generation so the others re-apply.
func Remove(tx *store.Tx, nodeID string) error {
	if err := RemoveMember(tx, nodeID); err != nil {
		return err
	}
	g, err := BumpGeneration(tx)
	if err != nil {
		return err
	}
	return founderApplies(tx, g)
}

// AllApplied reports whether every joining or active member has applied g.
func AllApplied(members []Member, g uint64) bool {
	return len(Lagging(members, g)) == 0
}

// AllAppliedIn is AllApplied over the members in tx, reading no further
// than the first that lags: every member's report of a new generation
// asks it, and all but the last find one soon.
func AllAppliedIn(tx *store.Tx, g uint64) (bool, error) {
	return allAppliedIn(tx, g, func(fn func(string, Member) error) error { return bucketMembers.ForEach(tx, fn) })
}

func allAppliedIn(tx *store.Tx, g uint64, forEach func(fn func(string, Member) error) error) (bool, error) {
	err := forEach(func(_ string, m Member) error {
		if lags(m, g) {
			return errLagging
		}
		return nil
	})
	if errors.Is(err, errLagging) {
		return false, nil
	}
	return err == nil, err
}

// errLagging stops AllAppliedIn's walk at the first member that lags.
var errLagging = errors.New("a member has not applied the generation")

func lags(m Member, g uint64) bool {
	return (m.State == MemberJoining || m.State == MemberActive) && m.AppliedGeneration < g
}

// Lagging lists the joining or active members that have not applied g:
// what a join admitted at g waits for, named so a stall says who holds it.
func Lagging(members []Member, g uint64) []Member {
	var out []Member
	for _, m := range members {
		if lags(m, g) {
			out = append(out, m)
		}
	}
	return out
}
