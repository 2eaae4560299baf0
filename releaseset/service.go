package releaseset

import (
	"encoding/json"
	"sync"
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

	// records caches every node's decoded record: decoding thousands of
	// stored records on each GET was most of its cost. It is filled from
	// the store once and then kept current by each committed Record.
	mu      sync.RWMutex
	records map[string]Stored
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
		stored := Stored(req)
		var prev Stored
		found, err := tx.GetJSON(bucketRecords, nodeID, &prev)
		if err != nil {
			return err
		}
		if err := tx.PutJSON(bucketRecords, nodeID, stored); err != nil {
			return err
		}
		tx.OnCommit(func() { s.remember(nodeID, stored) })
		// Periodic re-records of an unchanged release would flood the
		// audit log; a change of release is what an auditor looks for.
		if !found || prev.RunningRelease != stored.RunningRelease {
			return tx.Audit("release.recorded", actor, nodeID, map[string]string{"runningRelease": stored.RunningRelease})
		}
		return nil
	})
}

// input reads what Describe needs: the members from tx, their records
// from the cache.
func (s *Service) input(tx *store.Tx) (Input, error) {
	in := Input{Now: s.Now(), Node: s.Node, ControlPlane: s.ControlPlane, Records: map[string]Stored{}}
	members, err := membership.Members(tx)
	if err != nil {
		return in, err
	}
	if err := s.load(tx); err != nil {
		return in, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range members {
		in.Members = append(in.Members, m.NodeID)
		if st, ok := s.records[m.NodeID]; ok {
			in.Records[m.NodeID] = st
		}
	}
	return in, nil
}

// load fills the cache from the store the first time it is needed.
func (s *Service) load(tx *store.Tx) error {
	s.mu.RLock()
	loaded := s.records != nil
	s.mu.RUnlock()
	if loaded {
		return nil
	}
	all := map[string]Stored{}
	err := tx.ForEach(bucketRecords, func(node string, raw []byte) error {
		var st Stored
		if err := json.Unmarshal(raw, &st); err != nil {
			return err
		}
		all[node] = st
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.records == nil {
		s.records = all
	}
	s.mu.Unlock()
	return nil
}

func (s *Service) remember(node string, st Stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records != nil {
		s.records[node] = st
	}
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
