package releaseset

import (
	membership "stratum/cluster"
	"stratum/semver"
	"stratum/store"
	"stratum/wire"
)

// The admission release (SPEC 10.2) is what joiners are admitted on. It
// is not the release set's runningRelease: that is the oldest release a
// node *reports*, and a single node reporting 0.0.1 must not turn every
// joiner on the real release away. Records can only raise it, and only
// when every joined member agrees.

// raiseAdmission offers the admission release's owner (cluster,
// RaiseAdmissionRelease) the release every joined member has reached,
// once node's record rec could complete an agreement: the founder's own
// record is the admission release it runs; for this rule it reports what
// it holds (Held).
//
// It runs in the transaction that stores node's record rec. Only a
// joined member reporting a release above the admission release can
// complete an agreement, so every other record (the steady state: each
// node re-recording what it runs) costs one read. The other members'
// records come from the cache, not from decoding each stored record.
//
// raised is the admission release it rose to, empty when it did not.
func (s *Service) raiseAdmission(tx *store.Tx, actor string, node membership.Member, rec Stored) (raised string, err error) {
	if !joined(node) || semver.Valid(rec.RunningRelease) != nil || s.Held == nil {
		return "", nil
	}
	cur, err := membership.AdmissionRelease(tx)
	if err != nil {
		return "", err
	}
	if semver.Compare(rec.RunningRelease, cur) <= 0 {
		return "", nil
	}
	floor, ok, err := s.agreedFloor(tx, node.NodeID, rec.RunningRelease)
	if err != nil || !ok || semver.Compare(floor, cur) <= 0 {
		return "", err
	}
	held, err := s.Held(tx)
	if err != nil {
		return "", err
	}
	if err := membership.RaiseAdmissionRelease(tx, actor, floor, held); err != nil {
		return "", err
	}
	now, err := membership.AdmissionRelease(tx)
	if err != nil || now == cur {
		return "", err
	}
	return now, nil
}

// agreedFloor is the oldest release the joined members report, node's
// new record (running) included; ok is false while a joined member has
// no recent valid record.
func (s *Service) agreedFloor(tx *store.Tx, nodeID, running string) (string, bool, error) {
	members, err := membership.Members(tx)
	if err != nil {
		return "", false, err
	}
	if err := s.loadFrom(tx); err != nil {
		return "", false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	now := s.Now()
	floor := running
	for _, m := range members {
		if !joined(m) || m.NodeID == nodeID {
			continue
		}
		c, ok := s.records[m.NodeID]
		if !ok || now.Sub(c.recordedAt) > RecentWindow || semver.Valid(c.running) != nil {
			return "", false, nil // a joined member not heard from recently: no agreement
		}
		if semver.Compare(c.running, floor) < 0 {
			floor = c.running
		}
	}
	return floor, true, nil
}

// joined: a member admitted through a join that has joined (the founder,
// admitted by init, is not one).
func joined(m membership.Member) bool {
	return m.JoinID != "" && m.State == membership.MemberActive
}

// SetAdmission is the operator setting the admission release (the rule
// is cluster.SetAdmissionRelease's).
//
// The founder runs what it admits joiners on (it records the admission
// release as its own), so its record follows at once rather than at its
// next recording, minutes later: until then the set would show the
// founder behind the release just set, and its runningRelease, the
// oldest, would not be what the nodes run. So it does when a record
// raises the admission release (RecordDecoded).
func (s *Service) SetAdmission(actor string, req wire.SetAdmissionRequest) (wire.AdmissionView, error) {
	var out wire.AdmissionView
	err := s.DB.Update(func(tx *store.Tx) error {
		var err error
		out, err = membership.SetAdmissionRelease(tx, actor, req)
		return err
	})
	if err != nil || out.Previous == out.AdmissionRelease {
		return out, err
	}
	// A failure here is not the operator's: the founder's next recording
	// (every few minutes) carries the new release all the same.
	_ = s.followAdmission(out.AdmissionRelease)
	return out, nil
}

// followAdmission records the founder's kept record again with release
// as its runningRelease: the host facts it last collected, recorded now.
func (s *Service) followAdmission(release string) error {
	s.mu.RLock()
	c, ok := s.records[s.Node]
	s.mu.RUnlock()
	if !ok || c.running == release {
		return nil
	}
	st, err := s.stored(c)
	if err != nil {
		return err
	}
	return s.Record(FounderActor, s.Node, wire.RecordRequest{RunningRelease: release, Release: st.Release})
}

// FounderActor is who records the founder's own release.
const FounderActor = "founder"
