package releaseset

import (
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
// member (the founder aside: it records the admission release itself)
// has a recent record of R or newer. It never lowers it.
func (s *Service) raiseAdmission(tx *store.Tx, actor string) error {
	cur, err := membership.AdmissionRelease(tx)
	if err != nil {
		return err
	}
	members, err := membership.Members(tx)
	if err != nil {
		return err
	}
	now := s.Now()
	floor := ""
	for _, m := range members {
		if m.JoinID == "" || m.State != membership.MemberActive {
			continue
		}
		var st Stored
		found, err := tx.GetJSON(bucketRecords, m.NodeID, &st)
		if err != nil {
			return err
		}
		if !found || now.Sub(st.Release.RecordedAt) > RecentWindow || semver.Valid(st.RunningRelease) != nil {
			return nil // a joined member not heard from recently: no agreement
		}
		if floor == "" || semver.Compare(st.RunningRelease, floor) < 0 {
			floor = st.RunningRelease
		}
	}
	if floor == "" || semver.Compare(floor, cur) <= 0 {
		return nil
	}
	if err := membership.StoreAdmissionRelease(tx, floor); err != nil {
		return err
	}
	return tx.Audit("cluster.release.raised", actor, "admission-release", map[string]string{"from": cur, "to": floor, "why": "every joined member reports it or newer"})
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
