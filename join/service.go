package join

import (
	"bytes"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"stratum/apierr"
	"stratum/attest"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// DefaultDeliveryTimeout is --delivery-timeout's default.
const DefaultDeliveryTimeout = 30 * time.Minute

// PayloadOfferer tells whether the founder serves an imported release,
// and which releases its signed manifest upgrades from.
type PayloadOfferer interface {
	Offered(release string) bool
	UpgradesFrom(release string) []string
}

// Config wires a Service to the founder.
type Config struct {
	DB  *store.DB
	Now func() time.Time
	// JoinAddr is the advertised HOST:PORT of the join listener, for joinCommand.
	JoinAddr string
	// JoinCommandNamesRelease adds --release with the admission release to
	// joinCommand. A --dev founder sets it: its nodes are machines beside it
	// running its own build, with no stratum OS image to say which release
	// they run. A real node knows its release (SPEC 7), so a production
	// founder's command leaves it out and works for a node of any release.
	JoinCommandNamesRelease bool
	// CAPin is the cluster CA pin; read from the store when empty.
	CAPin string
	// Payloads is the founder's imported releases; may be nil.
	Payloads PayloadOfferer
	// MirrorURL is --release-source: when set, joiners fetch from it and
	// the founder serves nothing.
	MirrorURL       string
	DeliveryTimeout time.Duration
	Logger          *slog.Logger
	// Boot is the members' boot health (SPEC 11); nil when the prober is
	// off, and then no view carries boot fields.
	Boot BootHealth
	// Dev allows loopback management addresses (a lab on one machine).
	Dev bool
	// FounderAddrs are the founder host's own addresses: no joiner gets
	// a certificate for them.
	FounderAddrs []string
	// ControlPlane is the founder's control-plane build and schema levels:
	// the control plane a joining control-plane node shares a database
	// with. Its bundle carries it for the node's control-plane.json.
	ControlPlane *wire.ControlPlane
	// OpenBao mints control-plane nodes' tokens (SPEC 19); nil when the
	// founder has none configured.
	OpenBao OpenBao
	// EKPool is the manufacturer CA pool (--ek-ca) EK certificates are
	// checked against; nil when none is configured.
	EKPool *attest.Pool
	// Decoded keeps the identity and member records this service reads,
	// shared with other readers of them (the node leaf checks: a member's
	// report changes its record, decoded then once for both); nil: its
	// own.
	Decoded *cluster.Decoded
}

// BootHealth answers a member's last probed boot health.
type BootHealth interface {
	Boot(nodeID string) (cluster.Boot, bool)
}

// Service is the join domain over one store.
type Service struct {
	cfg Config
	db  *store.DB
	now func() time.Time
	log *slog.Logger
	hub *Hub
	// parked counts long-polls held by Park until they are answered.
	parked sync.WaitGroup
	// parkMu guards closing against Park adding to parked after Close
	// began to wait for it.
	parkMu  sync.Mutex
	closing bool
	kick    chan struct{} // wakes Step (Wake) when the turn changes
	// holds counts each registration's held long-polls (SPEC 10.10).
	holds *holdCounter
	// decoded keeps the identity and the member records, which every
	// registration's address check, every node's members list and every
	// member's report read; tokens the join tokens the registrations'
	// prechecks read (between two commits, the joiners sharing a token
	// read the same bytes).
	decoded *cluster.Decoded
	tokens  store.Decoded[tokenRecord]
	// nodeList is the members list encoded for nodes, built once per
	// generation (and again after nodeMembersMaxAge).
	nodeList nodeMembersCache
	// turnRecord keeps the join in its turn, which every member's report
	// of its generation reads (settle).
	turnRecord store.Decoded[record]
}

// New fills defaults; it starts nothing (see Step).
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("join: no store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Decoded == nil {
		cfg.Decoded = &cluster.Decoded{}
	}
	s := &Service{cfg: cfg, db: cfg.DB, now: cfg.Now, log: cfg.Logger, hub: NewHub(), kick: make(chan struct{}, 1), holds: newHoldCounter(MaxHoldsPerRegistration),
		decoded: cfg.Decoded}
	s.db.Subscribe(topicRegistration, s.heardRegistration)
	s.db.Subscribe(topicTurn, func(string) { s.kickRun() })
	return s, nil
}

// Store notes of this package: a registration changed (its join id), the
// turn changed.
const (
	topicRegistration = "join-registration"
	topicTurn         = "join-turn"
)

// heardRegistration wakes the registration's waiters; after a lost
// database connection (store.Everything) it wakes every waiter, and the
// timeout loop, to read the store again.
func (s *Service) heardRegistration(id string) {
	if id == store.Everything {
		s.hub.NotifyAll()
		s.kickRun()
		return
	}
	s.hub.Notify(id)
}

// Kick wakes the Step loop: something it waits on may have changed (the
// founder's OpenBao token after a converge).
func (s *Service) Kick() { s.kickRun() }

func (s *Service) kickRun() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Hub is the long-poll hub, for shutdown.
func (s *Service) Hub() *Hub { return s.hub }

// Close releases every waiter at once (they answer their current view)
// and waits, up to parkedDrain, until the parked ones are answered: their
// connections are no longer the HTTP server's to drain.
func (s *Service) Close() {
	s.parkMu.Lock()
	s.closing = true
	s.parkMu.Unlock()
	s.hub.Close()
	done := make(chan struct{})
	go func() { s.parked.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(parkedDrain):
		s.log.Warn("parked long-polls still unanswered at shutdown", "after", parkedDrain)
	}
}

// parkedDrain bounds how long shutdown waits for parked long-polls.
const parkedDrain = 10 * time.Second

// txn is one store transaction plus what its commit must announce.
type txn struct {
	*store.Tx
	s    *Service
	now  time.Time
	wake map[string]struct{}
	kick bool
	// puts counts putRecord's writes: a caller holding a record can tell
	// whether a step it called wrote it.
	puts int
}

// update runs fn in one transaction; only after it is durable are the
// touched registrations' waiters woken and the timeout loop told.
func (s *Service) update(fn func(t *txn) error) error {
	return s.db.Update(s.inTxn(fn))
}

// batch is update in a transaction shared with concurrent batch calls
// (one fsync for a rack of joiners registering at once). fn may run more
// than once: it must write only through t.
func (s *Service) batch(fn func(t *txn) error) error {
	return s.db.Batch(s.inTxn(fn))
}

func (s *Service) inTxn(fn func(t *txn) error) func(tx *store.Tx) error {
	return func(tx *store.Tx) error {
		t := &txn{Tx: tx, s: s, now: s.now().UTC(), wake: map[string]struct{}{}}
		generation := cluster.GenerationMark(tx)
		if err := fn(t); err != nil {
			return err
		}
		if !bytes.Equal(cluster.GenerationMark(tx), generation) {
			t.wake[membersTopic] = struct{}{}
		}
		ids := make([]string, 0, len(t.wake)+1)
		for id := range t.wake {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if len(ids) > 0 {
			ids = append(ids, listTopic)
		}
		// Notes reach the waiters and timeout loop of every replica of a
		// shared store, and only once the commit is durable.
		for _, id := range ids {
			tx.Notify(topicRegistration, id)
		}
		if t.kick {
			tx.Notify(topicTurn, "")
		}
		return nil
	}
}

func (s *Service) view(fn func(tx *store.Tx) error) error { return s.db.View(fn) }

func (t *txn) getRecord(id string) (record, bool, error) {
	return getRecord(t.Tx, id)
}

func getRecord(tx *store.Tx, id string) (record, bool, error) {
	return bucketRegistrations.Get(tx, id)
}

// putRecord stores r and marks it for waking: every write is a change.
func (t *txn) putRecord(r *record) error {
	r.UpdatedAt = t.now
	t.wake[r.JoinID] = struct{}{}
	t.puts++
	return bucketRegistrations.Put(t.Tx, r.JoinID, *r)
}

func notFound(joinID string) error {
	return apierr.New(apierr.NotFound, "no join registration %s", joinID)
}

// mustRecord loads a registration or answers 404.
func (t *txn) mustRecord(joinID string) (record, error) {
	r, found, err := t.getRecord(joinID)
	if err != nil {
		return r, err
	}
	if !found {
		return r, notFound(joinID)
	}
	return r, nil
}

// joinerRecord is joinID's record for the joiner holding keyPin: another
// key's registration is as unknown as a missing one (404, not 403).
func (t *txn) joinerRecord(keyPin, joinID string) (record, error) {
	r, found, err := t.getRecord(joinID)
	if err != nil {
		return r, err
	}
	if !found || r.KeyPin != keyPin {
		return r, notFound(joinID)
	}
	return r, nil
}

// operatorView reads joinID again, as a step of the transaction may have
// moved it on (the delivery slot), and answers the operator's view of it.
func (t *txn) operatorView(joinID string) (wire.OperatorView, error) {
	r, err := t.mustRecord(joinID)
	if err != nil {
		return wire.OperatorView{}, err
	}
	return t.s.operatorViewTx(t.Tx, r)
}

// mustMember is nodeID's member, or NOT_FOUND.
func (t *txn) mustMember(nodeID string) (cluster.Member, error) {
	m, found, err := cluster.GetMember(t.Tx, nodeID)
	if err != nil {
		return m, err
	}
	if !found {
		return m, apierr.New(apierr.NotFound, "no member %s", nodeID)
	}
	return m, nil
}

// clusterRelease is the release joiners must run: the admission release
// (cluster.AdmissionRelease, SPEC 10.2).
func (s *Service) clusterRelease(tx *store.Tx) (string, error) {
	return cluster.AdmissionRelease(tx)
}

// caPin is the configured pin, else the stored CA's.
func (s *Service) caPin(tx *store.Tx) (string, error) {
	if s.cfg.CAPin != "" {
		return s.cfg.CAPin, nil
	}
	ca, err := cluster.LoadCA(tx)
	if err != nil {
		return "", err
	}
	return ca.Pin(), nil
}
