package releaseset

import (
	membership "stratum/cluster"
	"stratum/store"
)

// Answer returns the encoded release set, building it only when the
// members, a record or the staleness of a record changed since the last
// one.
func (s *Service) Answer() (*Answer, error) {
	now := s.Now()
	var generation uint64
	var members []string
	err := s.DB.View(func(tx *store.Tx) error {
		if err := s.loadFrom(tx); err != nil {
			return err
		}
		generation = membership.Generation(tx)
		var err error
		members, err = s.memberIDs(tx, generation)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	version := s.version
	if s.answer.fresh(generation, version, now) {
		a := s.answer.ans
		s.mu.RUnlock()
		return a, nil
	}
	s.mu.RUnlock()

	// One build at a time: concurrent GETs of a changed set wait for it
	// rather than each encoding the same answer.
	s.building.Lock()
	defer s.building.Unlock()
	s.mu.RLock()
	if s.answer.fresh(generation, version, now) {
		a := s.answer.ans
		s.mu.RUnlock()
		return a, nil
	}
	in := Input{Now: now, Node: s.Node, ControlPlane: s.ControlPlane, Members: members, Records: make(map[string]Stored, len(s.records))}
	seqs := make(map[string]uint64, len(members))
	version = s.version
	for _, id := range members {
		if c, ok := s.records[id]; ok {
			in.Records[id] = c.stored
			seqs[id] = c.seq
		}
	}
	s.mu.RUnlock()

	set := Describe(in)
	a, err := s.encode(set, seqs)
	if err != nil {
		return nil, err
	}
	s.builds++
	a.ETag = etagOf(generation, version, s.builds)
	s.mu.Lock()
	s.answer = answerCache{ans: a, generation: generation, version: version, validUntil: validUntil(set, now)}
	s.mu.Unlock()
	return a, nil
}

// encode joins the head and each node's fragment, encoding only the
// fragments whose record or stale flag changed. Called with s.building held.
func (s *Service) encode(set Set, seqs map[string]uint64) (*Answer, error) {
	head, err := encodeHead(set)
	if err != nil {
		return nil, err
	}
	if s.fragments == nil {
		s.fragments = map[string]fragment{}
	}
	a := &Answer{parts: make([][]byte, 0, 2*len(set.Nodes)+2)}
	a.parts = append(a.parts, head)
	live := make(map[string]bool, len(set.Nodes))
	for i, n := range set.Nodes {
		if i > 0 {
			a.parts = append(a.parts, comma)
		}
		live[n.NodeID] = true
		seq := seqs[n.NodeID]
		f, ok := s.fragments[n.NodeID]
		if !ok || f.seq != seq || f.stale != n.Stale || f.running != n.RunningRelease || !n.Recorded {
			b, err := encodeNode(n)
			if err != nil {
				return nil, err
			}
			f = fragment{seq: seq, stale: n.Stale, running: n.RunningRelease, b: b}
			if n.Recorded {
				s.fragments[n.NodeID] = f
			}
		}
		a.parts = append(a.parts, f.b)
	}
	a.parts = append(a.parts, []byte(setTail))
	for id := range s.fragments {
		if !live[id] {
			delete(s.fragments, id)
		}
	}
	for _, p := range a.parts {
		a.size += len(p)
	}
	return a, nil
}

var comma = []byte{','}

// memberIDs returns the member ids in join order, decoding the members
// again only when the membership generation moved (every admission and
// removal bumps it).
func (s *Service) memberIDs(tx *store.Tx, generation uint64) ([]string, error) {
	s.mu.RLock()
	if s.membersKnown && s.membersGeneration == generation {
		ids := s.members
		s.mu.RUnlock()
		return ids, nil
	}
	s.mu.RUnlock()
	members, err := membership.Members(tx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.NodeID
	}
	s.mu.Lock()
	s.members, s.membersGeneration, s.membersKnown = ids, generation, true
	s.mu.Unlock()
	return ids, nil
}
