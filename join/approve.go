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
		if err := t.approve(&r, a, actorOf(by), nil); err != nil {
			return err
		}
		out, err = t.operatorView(joinID)
		return err
	})
	return out, err
}

// approve is every approval's one path (a person's, the inventory's, a
// replacement's): r, pending, takes the normalized assignment a, joins
// the queue and takes the slot when it is free, audited join.approved by
// actor with evidence added to the details. Every refusal comes before
// the first write.
func (t *txn) approve(r *record, a wire.Assignment, actor string, evidence map[string]string) error {
	a, source, err := t.approvable(r, a, "")
	if err != nil {
		return err
	}
	r.State, r.Reason, r.Assignment, r.ApprovedBy, r.ApprovedAt = wire.StateApproved, "", &a, actor, t.now
	r.MgmtIPSource = source
	if actor != inventoryActor {
		r.AutoApproval = ""
	}
	if err := t.enqueue(r); err != nil {
		return err
	}
	if err := t.putRecord(r); err != nil {
		return err
	}
	details := map[string]string{"nodeId": a.NodeID, "mgmtIp": a.MgmtIP, "mgmtIpSource": source}
	for k, v := range evidence {
		details[k] = v
	}
	if err := t.Audit("join.approved", actor, r.JoinID, details); err != nil {
		return err
	}
	return t.advance()
}

// approvable checks, writing nothing, that r can be approved with a as
// the cluster would be without the member leaving (a replacement's old
// member; "" for none), and completes a: the registration's address when
// a names none (with who chose it), a fresh node id when a names none.
func (t *txn) approvable(r *record, a wire.Assignment, leaving string) (wire.Assignment, string, error) {
	if r.State != wire.StatePending {
		return a, "", notApprovable(*r)
	}
	source := wire.MgmtIPFromOperator
	if a.MgmtIP == "" {
		if r.MgmtIP == "" {
			var f apierr.Fields
			f.Add("mgmtIp", "required: the registration reported no management address")
			return a, "", f.Err("the assignment has problems")
		}
		a.MgmtIP, source = r.MgmtIP, wire.MgmtIPFromJoiner
	}
	c, err := loadClaims(t.Tx, r.JoinID, t.s.decoded)
	if err != nil {
		return a, "", err
	}
	if leaving != "" {
		c = c.without(leaving)
	}
	if a.NodeID == "" {
		if a.NodeID, err = c.newNodeID(); err != nil {
			return a, "", err
		}
	}
	if f := c.refusals(a); len(f) > 0 {
		return a, "", apierr.WithFields(apierr.JoinApprovalRefused, "the assignment conflicts with the cluster; every conflict is listed", f)
	}
	if err := t.s.checkMgmtAddr(t.Tx, a.MgmtIP, apierr.JoinApprovalRefused); err != nil {
		return a, "", err
	}
	return a, source, nil
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
