package join

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
)

// Every member's agent reads the members list at each new generation (N
// lists of N members a join), and every node may see the whole list: so
// the list is built from the records (their MACs checked) and encoded
// once per generation, read within the transaction that reads, and the
// same bytes answer every node for nodeMembersMaxAge at most. What
// changes within a generation (a member's applied generation and state,
// boot health, a record written behind the founder's back, checked and
// a forged one left out) reaches the list within that. A node's own
// record, which makes it a member, is read and checked each time.

// NodeMembers is the members list a node is answered with: its
// generation and its JSON encoding, as the endpoint writes it. Body is
// shared by every answer: it must not be modified.
type NodeMembers struct {
	Generation uint64
	Body       []byte
}

// nodeMembersMaxAge bounds how long a list is served unchanged within a
// generation: how old the boot health in it may get (the founder's own
// phaseMs moves every millisecond, the prober's answers every round) and
// how late a change of a member record that keeps the generation (an
// applied report, a join made active) may reach it. An agent writes the
// list only when the generation changes.
const nodeMembersMaxAge = time.Second

// nodeMembersCache is the last list built for nodes, its generation and
// when it was built.
type nodeMembersCache struct {
	mu         sync.Mutex
	generation uint64
	built      time.Time
	answer     NodeMembers
	maxAge     time.Duration // 0: nodeMembersMaxAge
}

// get answers the cached list when it was built at generation less than
// its max age ago, else the one build makes (kept in its place).
func (c *nodeMembersCache) get(generation uint64, build func() ([]byte, error)) (NodeMembers, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maxAge := c.maxAge
	if maxAge == 0 {
		maxAge = nodeMembersMaxAge
	}
	now := time.Now()
	if c.answer.Body != nil && c.generation == generation && now.Sub(c.built) < maxAge {
		return c.answer, nil
	}
	body, err := build()
	if err != nil {
		return NodeMembers{}, err
	}
	answer := NodeMembers{Generation: generation, Body: body}
	if c.answer.Body == nil || generation >= c.generation || now.Sub(c.built) >= maxAge {
		// A reader of an older snapshot does not replace a newer list.
		c.generation, c.built, c.answer = generation, now, answer
	}
	return answer, nil
}

// nodeMembers is the members list for nodeID, a member (a node that is
// not one gets what an unknown id gets).
func (s *Service) nodeMembers(nodeID string) (NodeMembers, error) {
	var out NodeMembers
	err := s.view(func(tx *store.Tx) error {
		if _, found, err := s.decoded.Member(tx, nodeID); err != nil {
			return err
		} else if !found {
			return apierr.New(apierr.NotFound, "no member %s", nodeID)
		}
		g := cluster.Generation(tx)
		var err error
		out, err = s.nodeList.get(g, func() ([]byte, error) {
			v, err := s.membersList(tx, g)
			if err != nil {
				return nil, err
			}
			return encodeAnswer(v)
		})
		return err
	})
	return out, err
}

// encodeAnswer is v as the HTTP layer's writeJSON writes it: HTML
// characters as they are, a newline at the end.
func encodeAnswer(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
