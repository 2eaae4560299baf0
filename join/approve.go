package join

import (
	"stratum/apierr"
	"stratum/iam"
	"stratum/wire"
)

// Approve approves a pending registration with its assignment: it joins
// the queue, and takes the delivery slot at once when the slot is free.
func (s *Service) Approve(by iam.Principal, joinID string, a wire.Assignment) (wire.OperatorView, error) {
	if err := assignmentProblems(a).Err("the assignment has problems"); err != nil {
		return wire.OperatorView{}, err
	}
	a = normalized(a)
	var out wire.OperatorView
	err := s.update(func(t *txn) error {
		r, err := t.mustRecord(joinID)
		if err != nil {
			return err
		}
		if r.State != wire.StatePending {
			return notApprovable(r)
		}
		source := wire.MgmtIPFromOperator
		if a.MgmtIP == "" {
			if r.MgmtIP == "" {
				var f apierr.Fields
				f.Add("mgmtIp", "required: the registration reported no management address")
				return f.Err("the assignment has problems")
			}
			a.MgmtIP, source = r.MgmtIP, wire.MgmtIPFromJoiner
		}
		c, err := loadClaims(t.Tx, joinID)
		if err != nil {
			return err
		}
		if a.NodeID == "" {
			if a.NodeID, err = c.newNodeID(); err != nil {
				return err
			}
		}
		if f := c.refusals(a); len(f) > 0 {
			return apierr.WithFields(apierr.JoinApprovalRefused, "the assignment conflicts with the cluster; every conflict is listed", f)
		}
		if err := s.checkMgmtAddr(t.Tx, a.MgmtIP, apierr.JoinApprovalRefused); err != nil {
			return err
		}
		r.State, r.Reason, r.Assignment, r.ApprovedBy, r.ApprovedAt = wire.StateApproved, "", &a, actorOf(by), t.now
		r.MgmtIPSource = source
		if err := t.enqueue(&r); err != nil {
			return err
		}
		if err := t.putRecord(&r); err != nil {
			return err
		}
		if err := t.Audit("join.approved", actorOf(by), joinID, map[string]string{"nodeId": a.NodeID, "mgmtIp": a.MgmtIP, "mgmtIpSource": source}); err != nil {
			return err
		}
		if err := t.advance(); err != nil {
			return err
		}
		if r, err = t.mustRecord(joinID); err != nil {
			return err
		}
		out, err = operatorViewTx(t.Tx, r)
		return err
	})
	return out, err
}

// notApprovable says why r cannot be approved, in terms the operator can
// act on.
func notApprovable(r record) error {
	refuse := func(format string, args ...any) error {
		return apierr.New(apierr.JoinApprovalRefused, format, args...)
	}
	switch r.State {
	case wire.StateNeedsUpgrade:
		to := ""
		if r.Upgrade != nil {
			to = r.Upgrade.To
		}
		return refuse("join %s runs %s and is upgrading itself to %s: it is approvable only after it registers again on the cluster release", r.JoinID, r.Release, to)
	case wire.StateApproved:
		return refuse("join %s is already approved and waits for its turn", r.JoinID)
	case wire.StateDelivering, wire.StateInstalling:
		return refuse("join %s is already approved and its delivery is under way", r.JoinID)
	case wire.StateJoined:
		return refuse("join %s has already joined", r.JoinID)
	default:
		return refuse("join %s is %s (%s): the node must register again with a new token", r.JoinID, r.State, r.Reason)
	}
}
