package join

import (
	"context"
	"fmt"
	"time"

	"stratum/store"
)

// ExpireDeliveries fails the join in its turn when it has held the slot
// longer than DeliveryTimeout, so the queue moves on. It answers how many
// it failed. Run calls it; tests call it with an injected clock.
//
// The deadline runs from the delivery, through installing, until joined:
// a node that reported done but whose generation some member never
// applies must not block every later join.
func (s *Service) ExpireDeliveries() (int, error) {
	// A read first: a write transaction fsyncs even when it changes nothing.
	at, ok, err := s.nextDeadline()
	if err != nil || !ok || s.now().Before(at) {
		return 0, err
	}
	n := 0
	err = s.update(func(t *txn) error {
		id := turn(t.Tx)
		if id == "" {
			return nil
		}
		r, err := t.mustRecord(id)
		if err != nil {
			return err
		}
		if !inTurn(r.State) || t.now.Before(r.DeliveredAt.Add(s.cfg.DeliveryTimeout)) {
			return nil
		}
		n++
		reason := fmt.Sprintf("the delivery was not completed within the delivery timeout (%s)", s.cfg.DeliveryTimeout)
		return t.fail(&r, systemActor, "join.timed-out", reason)
	})
	return n, err
}

// nextDeadline is when the join in its turn times out.
func (s *Service) nextDeadline() (time.Time, bool, error) {
	var at time.Time
	var ok bool
	err := s.view(func(tx *store.Tx) error {
		id := turn(tx)
		if id == "" {
			return nil
		}
		r, found, err := getRecord(tx, id)
		if err != nil || !found || !inTurn(r.State) {
			return err
		}
		at, ok = r.DeliveredAt.Add(s.cfg.DeliveryTimeout), true
		return nil
	})
	return at, ok, err
}

// Step enforces the delivery timeout and does what OpenBao owes the
// queue (minting for the next control-plane delivery, revoking the tokens
// of joins that ended badly), once. It answers when to step again: at the
// one deadline there can be (a single join holds the slot), sooner while
// OpenBao owes work, or never (< 0) until Wake fires. The founder's
// scheduler runs it on the replica holding the background lease: no
// polling.
func (s *Service) Step(ctx context.Context) time.Duration {
	if n, err := s.ExpireDeliveries(); err != nil {
		s.log.Error("join: expire deliveries", "err", err)
	} else if n > 0 {
		s.log.Warn("join: delivery timed out", "joins", n, "timeout", s.cfg.DeliveryTimeout)
	}
	retry := s.openBaoWork(ctx)
	at, ok, err := s.nextDeadline()
	var sleep time.Duration
	switch {
	case err != nil:
		s.log.Error("join: read delivery deadline", "err", err)
		sleep = time.Minute // the store is closing or broken: retry calmly
	case ok:
		// A floor, so clock steps never make the loop spin.
		sleep = max(at.Sub(s.now()), 50*time.Millisecond)
	default:
		sleep = -1
	}
	if retry && (sleep < 0 || sleep > openBaoRetry) {
		// A delivery or a revocation waits on OpenBao.
		sleep = openBaoRetry
	}
	return sleep
}

// Wake fires when a commit changed the turn (or Kick was called): Step
// has new work or a new deadline.
func (s *Service) Wake() <-chan struct{} { return s.kick }
