package releaseset

import (
	"errors"

	"stratum/apierr"
	membership "stratum/cluster"
	"stratum/semver"
	"stratum/store"
)

// The admission release (SPEC 10.2) is what joiners are admitted on. It
// is not the release set's runningRelease: that is the oldest release a
// node *reports*, and a single node reporting 0.0.1 must not turn every
// joiner on the real release away. Records can only raise it, and only
// when every joined member agrees.

// AdmissionReleaseTx is the current admission release.
func AdmissionReleaseTx(tx *store.Tx) (string, error) { return membership.AdmissionRelease(tx) }

// raiseAdmission lifts the admission release to R once every joined
// member has a recent record of R or newer and R is a release the
// founder holds (imported, verified, not found corrupt: SPEC 16.6). The
// founder's own record is the admission release it runs; for this rule
// it reports what it holds. R is the newest held release that every
// joined member has reached. It never lowers the admission release, and
// a record of a release the founder does not hold moves it nowhere.
//
// It runs in the transaction that stores node's record rec. Only a
// joined member reporting a release above the admission release can
// complete an agreement, so every other record (the steady state: each
// node re-recording what it runs) costs one read. The other members'
// records come from the cache, not from decoding each stored record.
func (s *Service) raiseAdmission(tx *store.Tx, actor string, node membership.Member, rec Stored) error {
	if !joined(node) || semver.Valid(rec.RunningRelease) != nil || s.Held == nil {
		return nil
	}
	cur, err := membership.AdmissionRelease(tx)
	if err != nil {
		return err
	}
	if semver.Compare(rec.RunningRelease, cur) <= 0 {
		return nil
	}
	floor, ok, err := s.agreedFloor(tx, node.NodeID, rec.RunningRelease)
	if err != nil || !ok || semver.Compare(floor, cur) <= 0 {
		return err
	}
	held, err := s.Held(tx)
	if err != nil {
		return err
	}
	to := ""
	for _, r := range held {
		if semver.Valid(r) == nil && semver.Compare(r, cur) > 0 && semver.Compare(r, floor) <= 0 && (to == "" || semver.Compare(r, to) > 0) {
			to = r
		}
	}
	if to == "" {
		return nil
	}
	if err := membership.StoreAdmissionRelease(tx, to); err != nil {
		return err
	}
	return tx.Audit("cluster.release.raised", actor, "admission-release", map[string]string{"from": cur, "to": to, "why": "every joined member reports it or newer and the founder holds it"})
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

// SetAdmissionRequest is the body of PUT /v1/admin/cluster/release.
type SetAdmissionRequest struct {
	Release        string `json:"release"`
	AllowDowngrade bool   `json:"allowDowngrade"`
}

// AdmissionView answers PUT /v1/admin/cluster/release.
type AdmissionView struct {
	AdmissionRelease string `json:"admissionRelease"`
	Previous         string `json:"previous"`
}

// SetAdmission is the operator setting the admission release. Lowering
// it needs AllowDowngrade: it re-admits joiners on an older release.
func (s *Service) SetAdmission(actor string, req SetAdmissionRequest) (AdmissionView, error) {
	var f apierr.Fields
	if req.Release == "" {
		f.Add("release", "required")
	} else if semver.Valid(req.Release) != nil {
		f.Add("release", "not a semantic version (e.g. 0.6.0)")
	}
	if err := f.Err("the cluster release has problems"); err != nil {
		return AdmissionView{}, err
	}
	var out AdmissionView
	err := s.DB.Update(func(tx *store.Tx) error {
		cur, err := membership.AdmissionRelease(tx)
		if errors.Is(err, membership.ErrAdmissionReleaseRejected) {
			cur, err = "", nil // the operator's word replaces a record that fails its MAC
		}
		if err != nil {
			return err
		}
		out = AdmissionView{AdmissionRelease: req.Release, Previous: cur}
		if semver.Compare(req.Release, cur) < 0 && !req.AllowDowngrade {
			return apierr.New(apierr.Conflict, "the admission release is %s: lowering it to %s admits joiners on an older release, and needs allowDowngrade (stratum cluster release set %s --allow-downgrade)", cur, req.Release, req.Release)
		}
		if req.Release == cur {
			return nil
		}
		if err := membership.StoreAdmissionRelease(tx, req.Release); err != nil {
			return err
		}
		kind := "cluster.release.set"
		if semver.Compare(req.Release, cur) < 0 {
			kind = "cluster.release.downgraded"
		}
		return tx.Audit(kind, actor, "admission-release", map[string]string{"from": cur, "to": req.Release})
	})
	return out, err
}
