package releaseset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"stratum/apierr"
	membership "stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// Config is what a Service is built from.
type Config struct {
	DB  *store.DB
	Now func() time.Time // time.Now when nil
	// Node is the answering node (the founder) and ControlPlane its build.
	Node         string
	ControlPlane wire.ControlPlane
	// Held lists the releases the founder holds (imported and verified):
	// the only ones the admission release rises to by itself (SPEC 16.6).
	// Nil: it rises only when the operator sets it.
	Held func(*store.Tx) ([]string, error)
}

// Service keeps node release records in the store and answers the set.
type Service struct {
	Config

	// records caches every node's decoded record: decoding thousands of
	// stored records on each GET was most of its cost. It is filled from
	// the store once and then kept current by each committed Record.
	mu      sync.RWMutex
	records map[string]cachedRecord
	// version counts remembered records: an Answer built at an older
	// version is out of date.
	version uint64
	// members caches the member ids of membersGeneration, in join
	// order, and hostnames their host names (a member's is set when it
	// is admitted, which moves the generation).
	members           []string
	hostnames         map[string]string
	membersGeneration uint64
	membersKnown      bool
	answer            answerCache

	// building serializes Answer builds; fragments (guarded by it) keeps
	// each node's encoded entry between builds while they are few enough
	// (fragmentBudget).
	building  sync.Mutex
	fragments map[string]fragment
	builds    uint64
	// rebuilding: a view is being built in the background (large sets).
	rebuilding atomic.Bool

	// intern shares the strings of the kept records' facts.
	intern interner
}

// Record stores nodeID's release, stamping recordedAt. A node that is not
// a member is NOT_FOUND.
func (s *Service) Record(actor, nodeID string, req wire.RecordRequest) error {
	return s.RecordDecoded(actor, nodeID, Request{RecordRequest: req})
}

// memberRead, when set (by tests), runs between a record's read of its
// member, before the shared commit, and the commit.
var memberRead func(nodeID string)

// RecordDecoded is Record of a request as DecodeRecordRequest read it, while
// its body is still held.
func (s *Service) RecordDecoded(actor, nodeID string, r Request) error {
	req := r.RecordRequest
	req.Release.RecordedAt = s.Now().UTC()
	stored := Stored{RunningRelease: req.RunningRelease, Release: req.Release}
	// What the cache keeps and the stored record are made before the
	// transaction, from one encoding of the record: concurrent records
	// share one commit (Batch), which runs their transactions one after
	// the other.
	buf := storedPool.Get().(*[]byte)
	kept, raw, err := s.keep(nodeID, stored, 0, (*buf)[:0], r.tail)
	defer func() {
		// The store holds raw until the commit, which Batch waits for.
		if raw != nil && cap(raw) <= maxPooledStored {
			*buf = raw[:0]
		}
		storedPool.Put(buf)
	}()
	if err != nil {
		return err
	}
	// The member is read and decoded here, while other calls commit:
	// in the shared commit, which runs its calls one after the other,
	// member only compares the bytes stored now with the ones it
	// decoded (9 us of a record's 23 in the commit at 100,000 nodes).
	var member membership.Decoded
	if err := s.DB.View(func(tx *store.Tx) error {
		_, _, err := member.Member(tx, nodeID)
		return err
	}); err != nil {
		return err
	}
	if memberRead != nil {
		memberRead(nodeID)
	}
	var raised string
	err = s.DB.Batch(func(tx *store.Tx) error {
		raised = ""
		m, found, err := member.Member(tx, nodeID)
		if err != nil {
			return err
		} else if !found {
			return apierr.New(apierr.NotFound, "no member %s", nodeID)
		}
		// A delivery can still be cancelled: until its join is installing
		// or joined, what the node says about itself does not count.
		if !m.Vouched() {
			return apierr.New(apierr.Forbidden, "node %s is still in its delivery: its release is recorded once its join is installing or joined", nodeID)
		}
		// Only the previous release is read (not the whole record decoded).
		prev, found, err := previousRunning(tx, nodeID)
		if err != nil {
			return err
		}
		if err := bucketRecords.Put(tx, nodeID, raw); err != nil {
			return err
		}
		to, err := s.raiseAdmission(tx, actor, m, stored)
		if err != nil {
			return err
		}
		raised = to
		seq, err := bucketRecords.NextSequence(tx)
		if err != nil {
			return err
		}
		tx.OnCommit(func() {
			c := kept
			c.seq = seq
			s.remember(nodeID, c)
		})
		tx.Notify(topicRecords, nodeID+" "+strconv.FormatUint(seq, 10))
		// Periodic re-records of an unchanged release would flood the
		// audit log; a change of release is what an auditor looks for.
		if !found || prev != stored.RunningRelease {
			return tx.Audit("release.recorded", actor, nodeID, map[string]string{"runningRelease": stored.RunningRelease})
		}
		return nil
	})
	if err == nil && raised != "" && nodeID != s.Node {
		// The founder runs what it admits joiners on (SetAdmission); a
		// failure leaves it to the founder's next recording.
		_ = s.followAdmission(raised)
	}
	return err
}

// input reads what Describe needs: the members from tx, their records
// decoded from the cache.
func (s *Service) input(tx *store.Tx) (Input, error) {
	in := Input{Now: s.Now(), Node: s.Node, ControlPlane: s.ControlPlane, Records: map[string]Stored{}, Hostnames: map[string]string{}}
	members, err := membership.Members(tx)
	if err != nil {
		return in, err
	}
	if in.AdmissionRelease, err = membership.AdmissionRelease(tx); err != nil {
		return in, err
	}
	if err := s.loadFrom(tx); err != nil {
		return in, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range members {
		in.Members = append(in.Members, m.NodeID)
		in.Hostnames[m.NodeID] = m.Hostname
		if c, ok := s.records[m.NodeID]; ok {
			st, err := s.stored(c)
			if err != nil {
				return in, err
			}
			in.Records[m.NodeID] = st
		}
	}
	return in, nil
}

// New builds the service and fills its cache from the store, before it
// serves or records anything, so no commit can fall between the read and
// the hooks that keep the cache current.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("releaseset: no store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{Config: cfg}
	s.DB.Subscribe(topicRecords, s.heard)
	if err := s.DB.View(s.loadFrom); err != nil {
		return nil, fmt.Errorf("loading the release records: %w", err)
	}
	return s, nil
}

// topicRecords announces a committed record: "NODE SEQ".
const topicRecords = "release-records"

// heard keeps the cache current when another replica of a shared store
// recorded (this replica's own commits reach the cache first, by their
// hook). A note is a hint only (SPEC 16.7: any role that may connect can
// send one): it names the node to read again and nothing else. The record
// is read in a transaction begun after the note arrived, together with
// the bucket's sequence in that snapshot, and kept with that sequence, so
// a late local hook carrying an older sequence cannot put an older record
// back, and a note's own sequence, forged or not, decides nothing. One
// key read: it runs on the store's listener, which every cross-replica
// wake waits behind.
func (s *Service) heard(payload string) {
	node, noted, _ := strings.Cut(payload, " ")
	if node == "" {
		s.dropCache() // every note may have been missed: load again
		return
	}
	s.mu.RLock()
	loaded := s.records != nil
	cur, cached := s.records[node]
	s.mu.RUnlock()
	if !loaded {
		return
	}
	// A record kept at the noted sequence or later already holds what
	// the note announces: this replica's own records (remembered at
	// commit, before the note is delivered) cost no second read, decode
	// and compression.
	if n, err := strconv.ParseUint(noted, 10, 64); err == nil && cached && cur.seq >= n {
		return
	}
	var st Stored
	var found bool
	var seq uint64
	if err := s.DB.View(func(tx *store.Tx) error {
		raw := bucketRecords.Get(tx, node)
		if found = raw != nil; found {
			var err error
			if st, err = DecodeStored(raw); err != nil {
				return err
			}
		}
		var err error
		seq, err = bucketRecords.Sequence(tx)
		return err
	}); err != nil {
		s.dropCache()
		return
	}
	if !found {
		// No record: nothing to keep unless the cache holds one (it was
		// deleted). A note naming a node that never recorded, forged
		// or not, costs one key read, not a reload of every record.
		s.mu.RLock()
		_, cached := s.records[node]
		s.mu.RUnlock()
		if cached {
			s.dropCache()
		}
		return
	}
	c, err := s.cache(node, st, seq)
	if err != nil {
		s.dropCache()
		return
	}
	s.remember(node, c)
}

// dropCache makes the next read load every record again. Same lock order
// as Answer: building, then mu.
func (s *Service) dropCache() {
	s.building.Lock()
	defer s.building.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = nil
	s.fragments = nil
	s.version++ // answers built before are out of date
}

// readRecords decodes every stored record into what the cache keeps.
func (s *Service) readRecords(tx *store.Tx) (map[string]cachedRecord, error) {
	all := map[string]cachedRecord{}
	err := bucketRecords.ForEach(tx, func(node string, raw []byte) error {
		st, err := DecodeStored(raw)
		if err != nil {
			return fmt.Errorf("release record of %s: %w", node, err)
		}
		c, err := s.cache(node, st, 0)
		if err != nil {
			return err
		}
		all[node] = c
		return nil
	})
	return all, err
}

// loadFrom fills the cache from tx unless it is already filled.
func (s *Service) loadFrom(tx *store.Tx) error {
	s.mu.RLock()
	loaded := s.records != nil
	s.mu.RUnlock()
	if loaded {
		return nil
	}
	all, err := s.readRecords(tx)
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

func (s *Service) remember(node string, c cachedRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records == nil {
		return
	}
	if cur, ok := s.records[node]; ok && cur.seq > c.seq {
		return
	}
	s.records[node] = c
	s.version++
}

// Describe answers the release set.
func (s *Service) Describe() (wire.ReleaseSet, error) {
	var set wire.ReleaseSet
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
	members, err := membership.Members(tx)
	if err != nil {
		return "", err
	}
	if err := s.loadFrom(tx); err != nil {
		return "", err
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.NodeID
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return oldestRunning(ids, func(id string) (string, bool) {
		c, ok := s.records[id]
		return c.running, ok
	}), nil
}

// Forget deletes nodeID's release record in tx, for a member leaving the
// cluster: a removed node counts nowhere (the set, its summary, the
// admission agreement), and a node admitted later under the same id does
// not inherit its record. Every replica's cache hears of it after the
// commit (heard: the record is gone, so the cache is loaded again).
func Forget(tx *store.Tx, nodeID string) error {
	if !bucketRecords.Has(tx, nodeID) {
		return nil
	}
	if err := bucketRecords.Delete(tx, nodeID); err != nil {
		return err
	}
	tx.Notify(topicRecords, nodeID)
	return nil
}
