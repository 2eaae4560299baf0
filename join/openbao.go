package join

import (
	"context"
	"errors"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/openbao"
	"stratum/store"
	"stratum/wire"
)

// OpenBao is the founder's OpenBao as deliveries need it (SPEC 19);
// Config.OpenBao is nil when none is configured, and then no bundle
// carries an OpenBao token.
type OpenBao interface {
	// FounderToken looks the founder's token up and applies the
	// root-token rule: the token, or why no bundle may carry it now.
	FounderToken(ctx context.Context) (string, error)
	// MintNodeToken creates nodeID's periodic, orphan stratum-node token.
	MintNodeToken(ctx context.Context, founderToken, nodeID string) (openbao.Token, error)
	// Revoke revokes a node token by its accessor.
	Revoke(ctx context.Context, accessor string) error
}

// bucketRevocations lists node-token accessors still to revoke (accessor
// -> node id): a join that failed or was cancelled, a member removed. The
// transaction that ends the join records it; the Step loop revokes it
// outside any transaction, and again after a restart until OpenBao
// confirms.
var bucketRevocations = store.NewRawBucket("join-openbao-revocations")

// openBaoGrant is what a control-plane delivery carries from OpenBao.
type openBaoGrant struct {
	founderToken string
	node         openbao.Token
}

// carriesOpenBao reports whether a delivery to role carries OpenBao
// tokens: control-plane only (SPEC 4.6, 16.1), and only when the founder
// has an OpenBao.
func (s *Service) carriesOpenBao(role string) bool {
	return s.cfg.OpenBao != nil && role == roleControlPlane
}

// openBaoRetry is how soon a delivery waiting on OpenBao is tried again.
const openBaoRetry = 3 * time.Second

// deliverWithOpenBao gives the turn to the head of the queue when its
// delivery needs OpenBao: the founder's token is looked up and the node's
// minted outside any transaction, then delivered in one that checks the
// head is still the same. It answers whether it must be tried again (the
// head waits on OpenBao).
func (s *Service) deliverWithOpenBao(ctx context.Context) (bool, error) {
	var r record
	var waiting bool
	err := s.view(func(tx *store.Tx) error {
		if turn(tx) != "" {
			return nil
		}
		head, err := queueHead(tx)
		if err != nil || head == "" {
			return err
		}
		rec, found, err := getRecord(tx, head)
		if err != nil || !found || rec.State != wire.StateApproved || !s.carriesOpenBao(rec.Role) || rec.Assignment == nil {
			return err
		}
		r, waiting = rec, true
		return nil
	})
	if err != nil || !waiting {
		return false, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	founderToken, err := s.cfg.OpenBao.FounderToken(cctx)
	if err != nil {
		return true, s.holdReason(r.JoinID, err)
	}
	node, err := s.cfg.OpenBao.MintNodeToken(cctx, founderToken, r.Assignment.NodeID)
	if err != nil {
		return true, s.holdReason(r.JoinID, err)
	}
	delivered := false
	err = s.update(func(t *txn) error {
		delivered = false
		if turn(t.Tx) != "" {
			return nil
		}
		if head, err := queueHead(t.Tx); err != nil || head != r.JoinID {
			return err
		}
		cur, err := t.mustRecord(r.JoinID)
		if err != nil || cur.State != wire.StateApproved {
			return err
		}
		if err := t.dequeue(&cur); err != nil {
			return err
		}
		if err := t.deliverWith(&cur, &openBaoGrant{founderToken: founderToken, node: node}); err != nil {
			return err
		}
		delivered = true
		return nil
	})
	if err != nil || !delivered {
		// The token reached no one: revoke it now, or record it for later.
		if rerr := s.cfg.OpenBao.Revoke(cctx, node.Accessor); rerr != nil {
			s.log.Warn("join: revoking an undelivered OpenBao node token failed; retried later", "nodeId", r.Assignment.NodeID, "err", rerr)
			_ = s.update(func(t *txn) error { return t.queueRevocation(node.Accessor, r.Assignment.NodeID) })
		}
	}
	return false, err
}

// holdReason shows why the approved head of the queue waits (its view and
// the operator's), changing the record only when the reason changes.
func (s *Service) holdReason(joinID string, cause error) error {
	reason := cause.Error()
	var e *apierr.Error
	if !errors.As(cause, &e) {
		reason = string(apierr.Unavailable) + ": " + reason
	}
	return s.update(func(t *txn) error {
		r, found, err := t.getRecord(joinID)
		if err != nil || !found || r.State != wire.StateApproved || r.Reason == reason {
			return err
		}
		r.Reason = reason
		return t.putRecord(&r)
	})
}

// queueRevocation records a node token to revoke and wakes the Step loop.
func (t *txn) queueRevocation(accessor, nodeID string) error {
	if accessor == "" {
		return nil
	}
	t.kick = true
	return bucketRevocations.Put(t.Tx, accessor, []byte(nodeID))
}

// revokeMember queues the node token of a member being removed.
func (t *txn) revokeMember(m cluster.Member) error {
	return t.queueRevocation(m.OpenBaoAccessor, m.NodeID)
}

// drainRevocations revokes every recorded node token; it answers whether
// some remain (OpenBao unreachable: tried again later).
func (s *Service) drainRevocations(ctx context.Context) (bool, error) {
	if s.cfg.OpenBao == nil {
		return false, nil
	}
	type pending struct{ accessor, nodeID string }
	var todo []pending
	err := s.view(func(tx *store.Tx) error {
		return bucketRevocations.ForEach(tx, func(k string, v []byte) error {
			todo = append(todo, pending{k, string(v)})
			return nil
		})
	})
	if err != nil || len(todo) == 0 {
		return false, err
	}
	left := false
	for _, p := range todo {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := s.cfg.OpenBao.Revoke(cctx, p.accessor)
		cancel()
		if err != nil {
			left = true
			s.log.Warn("join: revoking an OpenBao node token failed; retried later", "nodeId", p.nodeID, "err", err)
			continue
		}
		err = s.update(func(t *txn) error {
			if err := bucketRevocations.Delete(t.Tx, p.accessor); err != nil {
				return err
			}
			return t.Audit("openbao.node-token.revoked", systemActor, p.nodeID, map[string]string{"accessor": p.accessor})
		})
		if err != nil {
			return true, err
		}
	}
	return left, nil
}

// openBaoWork runs what the Step loop owes OpenBao: pending revocations
// and a delivery waiting on it. It answers whether to come back soon.
func (s *Service) openBaoWork(ctx context.Context) bool {
	if s.cfg.OpenBao == nil {
		return false
	}
	again, err := s.drainRevocations(ctx)
	if err != nil {
		s.log.Error("join: OpenBao revocations", "err", err)
		again = true
	}
	wait, err := s.deliverWithOpenBao(ctx)
	if err != nil {
		s.log.Error("join: OpenBao delivery", "err", err)
		wait = true
	}
	return again || wait
}
