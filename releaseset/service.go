package releaseset

import (
	"encoding/json"
	"time"

	"stratum/apierr"
	membership "stratum/cluster"
	"stratum/store"
)

const bucketRecords = "release-records"

// Service keeps node release records in the store and answers the set.
type Service struct {
	DB  *store.DB
	Now func() time.Time
	// Node is the answering node (the founder) and ControlPlane its build.
	Node         string
	ControlPlane ControlPlane
}

// Record stores nodeID's release, stamping recordedAt. A node that is not
// a member is NOT_FOUND.
func (s *Service) Record(actor, nodeID string, req RecordRequest) error {
	req.Release.RecordedAt = s.Now().UTC()
	return s.DB.Update(func(tx *store.Tx) error {
		if _, found, err := membership.GetMember(tx, nodeID); err != nil {
			return err
		} else if !found {
			return apierr.New(apierr.NotFound, "no member %s", nodeID)
		}
		stored := Stored{RunningRelease: req.RunningRelease, Release: req.Release}
		var prev Stored
		found, err := tx.GetJSON(bucketRecords, nodeID, &prev)
		if err != nil {
			return err
		}
		if err := tx.PutJSON(bucketRecords, nodeID, stored); err != nil {
			return err
		}
		// Periodic re-records of an unchanged release would flood the
		// audit log; a change of release is what an auditor looks for.
		if !found || prev.RunningRelease != stored.RunningRelease {
			return tx.Audit("release.recorded", actor, nodeID, map[string]string{"runningRelease": stored.RunningRelease})
		}
		return nil
	})
}

// Input reads what Describe needs inside tx.
func (s *Service) input(tx *store.Tx) (Input, error) {
	in := Input{Now: s.Now(), Node: s.Node, ControlPlane: s.ControlPlane, Records: map[string]Stored{}}
	members, err := membership.Members(tx)
	if err != nil {
		return in, err
	}
	for _, m := range members {
		in.Members = append(in.Members, m.NodeID)
		raw := tx.GetRaw(bucketRecords, m.NodeID)
		if raw == nil {
			continue
		}
		var st Stored
		if err := json.Unmarshal(raw, &st); err != nil {
			return in, err
		}
		in.Records[m.NodeID] = st
	}
	return in, nil
}

// Describe answers the release set.
func (s *Service) Describe() (Set, error) {
	var set Set
	err := s.DB.View(func(tx *store.Tx) error {
		in, err := s.input(tx)
		if err != nil {
			return err
		}
		set = Describe(in)
		return nil
	})
	return set, err
}

// RunningReleaseTx is the cluster's running release as known in tx: the
// oldest recorded release of its members, empty when none is known.
func (s *Service) RunningReleaseTx(tx *store.Tx) (string, error) {
	in, err := s.input(tx)
	if err != nil {
		return "", err
	}
	return RunningRelease(in), nil
}
