package join

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// Every member's agent reads the members list at each new generation (N
// lists of N members a join), and every node may see the whole list: so
// the list is built from the records (their MACs checked) and encoded
// once per change of the members, and the same bytes answer every node.
// The change is told within the transaction that reads: the generation
// and cluster.MembersVersion equal to those the bytes were built from.
// The version carries no MAC, so the bytes are trusted on its word for
// nodeMembersMaxAge at most: a record changed behind the founder's back
// is read, checked (a forged one left out) and served within that.

// NodeMembers is the members list a node is answered with: its
// generation and its JSON encoding, as the endpoint writes it. Body is
// shared by every answer: it must not be modified.
type NodeMembers struct {
	Generation uint64
	Body       []byte
}

// nodeMembersMaxAge bounds how long a list is served unchanged: how old
// the boot health in it may get (the founder's own phaseMs moves every
// millisecond and the prober's answers every round, none of them in the
// store), and how long a change that did not move MembersVersion (the
// store written behind the founder's back) may go unseen.
const nodeMembersMaxAge = time.Second

// nodeMembersCache is the last list built for nodes and what it was
// built from.
type nodeMembersCache struct {
	mu         sync.Mutex
	generation uint64
	version    uint64
	built      time.Time
	answer     NodeMembers
	maxAge     time.Duration // 0: nodeMembersMaxAge
}

// get answers the cached list when it was built at generation and
// version less than its max age ago, else the one build makes (kept in
// its place).
func (c *nodeMembersCache) get(generation, version uint64, build func() ([]byte, error)) (NodeMembers, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maxAge := c.maxAge
	if maxAge == 0 {
		maxAge = nodeMembersMaxAge
	}
	now := time.Now()
	if c.answer.Body != nil && c.generation == generation && c.version == version && now.Sub(c.built) < maxAge {
		return c.answer, nil
	}
	body, err := build()
	if err != nil {
		return NodeMembers{}, err
	}
	c.generation, c.version, c.built = generation, version, now
	c.answer = NodeMembers{Generation: generation, Body: body}
	return c.answer, nil
}

// nodeMembers is the members list for nodeID, a member (a node that is
// not one gets what an unknown id gets: its own record is read and
// checked each time).
func (s *Service) nodeMembers(nodeID string) (NodeMembers, error) {
	var out NodeMembers
	err := s.view(func(tx *store.Tx) error {
		if _, found, err := s.decoded.Member(tx, nodeID); err != nil {
			return err
		} else if !found {
			return apierr.New(apierr.NotFound, "no member %s", nodeID)
		}
		version, err := cluster.MembersVersion(tx)
		if err != nil {
			return err
		}
		g := cluster.Generation(tx)
		out, err = s.nodeList.get(g, version, func() ([]byte, error) {
			members, err := s.decoded.Members(tx)
			if err != nil {
				return nil, err
			}
			v := wire.MembersView{Generation: g, Members: make([]wire.MemberView, 0, len(members))}
			for _, m := range members {
				v.Members = append(v.Members, s.memberView(m))
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
