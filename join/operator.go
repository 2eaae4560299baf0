package join

import (
	"sort"
	"strings"
	"unicode/utf8"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/iam"
	"stratum/store"
	"stratum/strictjson"
	"stratum/wire"
)

const maxReasonSize = 1024

// List answers the operator's view of every registration, oldest first,
// optionally only those in state.
func (s *Service) List(state string) ([]wire.OperatorView, error) {
	if state != "" && !validState(state) {
		var f apierr.Fields
		f.Add("state", "must be one of %s", strings.Join(wire.States, ", "))
		return nil, f.Err("unknown state filter")
	}
	var recs []record
	var pos map[string]int
	var members []cluster.Member
	err := s.view(func(tx *store.Tx) error {
		var err error
		if pos, err = queuePositions(tx); err != nil {
			return err
		}
		if members, err = s.decoded.Members(tx); err != nil {
			return err
		}
		return bucketRegistrations.ForEach(tx, func(_ string, r record) error {
			if state == "" || r.State == state {
				recs = append(recs, r)
			}
			return nil
		})
	})
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	out := make([]wire.OperatorView, 0, len(recs))
	for _, r := range recs {
		out = append(out, operatorView(r, pos[r.JoinID], members))
	}
	return out, err
}

// Get answers the operator's view of one registration.
func (s *Service) Get(joinID string) (wire.OperatorView, error) {
	var out wire.OperatorView
	err := s.view(func(tx *store.Tx) error {
		r, found, err := getRecord(tx, joinID)
		if err != nil {
			return err
		}
		if !found {
			return notFound(joinID)
		}
		out, err = s.operatorViewTx(tx, r)
		return err
	})
	return out, err
}

// DecodeReason decodes a reject or cancel body {"reason": "..."}; an
// empty body is no reason.
func DecodeReason(body []byte) (string, error) {
	var req struct {
		Reason string `json:"reason"`
	}
	err := strictjson.DecodeChecked(strictjson.OrEmptyObject(body), &req, "the request has problems", func() apierr.Fields { return reasonProblems(req.Reason) })
	if err != nil {
		return "", err
	}
	return req.Reason, nil
}

func reasonProblems(reason string) apierr.Fields {
	var f apierr.Fields
	if len(reason) > maxReasonSize || !utf8.ValidString(reason) {
		f.Add("reason", "at most %d bytes of UTF-8", maxReasonSize)
	}
	return f
}

// requiredReason checks a reason that must be given (who reads it: for).
func requiredReason(reason, forWhom string) error {
	f := reasonProblems(reason)
	if strings.TrimSpace(reason) == "" {
		f.Add("reason", "required: say why, %s", forWhom)
	}
	return f.Err("the request has problems")
}

// Reject ends a registration that has not had its turn (pending,
// needs-upgrade or approved); an approved one leaves the queue. It needs
// a reason (SPEC 17): the joiner prints it and the audit keeps it.
func (s *Service) Reject(by iam.Principal, joinID, reason string) (wire.OperatorView, error) {
	if err := requiredReason(reason, "for the joiner and the audit log"); err != nil {
		return wire.OperatorView{}, err
	}
	var out wire.OperatorView
	err := s.update(func(t *txn) error {
		r, err := t.mustRecord(joinID)
		if err != nil {
			return err
		}
		switch r.State {
		case wire.StatePending, wire.StateNeedsUpgrade, wire.StateApproved:
		case wire.StateDelivering, wire.StateInstalling:
			return apierr.New(apierr.Conflict, "join %s is %s: its delivery is under way; cancel it instead", joinID, r.State)
		default:
			return apierr.New(apierr.Conflict, "join %s is already %s", joinID, r.State)
		}
		if err := t.dequeue(&r); err != nil {
			return err
		}
		r.State, r.Reason = wire.StateRejected, reason
		if err := t.putRecord(&r); err != nil {
			return err
		}
		if err := t.Audit("join.rejected", actorOf(by), joinID, map[string]string{"reason": reason}); err != nil {
			return err
		}
		out, err = s.operatorViewTx(t.Tx, r)
		return err
	})
	return out, err
}

// Cancel fails a join whose delivery is under way: its member is removed,
// the generation bumped and the next approved join gets its turn.
func (s *Service) Cancel(by iam.Principal, joinID, reason string) (wire.OperatorView, error) {
	if err := reasonProblems(reason).Err("the request has problems"); err != nil {
		return wire.OperatorView{}, err
	}
	if reason == "" {
		reason = "cancelled by " + actorOf(by)
	}
	var out wire.OperatorView
	err := s.update(func(t *txn) error {
		r, err := t.mustRecord(joinID)
		if err != nil {
			return err
		}
		if !inTurn(r.State) {
			return apierr.New(apierr.Conflict, "join %s is %s: only a join in delivering or installing can be cancelled (reject one that has not had its turn)", joinID, r.State)
		}
		if err := t.fail(&r, actorOf(by), "join.cancelled", reason); err != nil {
			return err
		}
		out, err = t.operatorView(joinID)
		return err
	})
	return out, err
}
