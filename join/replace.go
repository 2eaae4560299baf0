package join

import (
	"strings"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/iam"
	"stratum/strictjson"
	"stratum/wire"
)

// ReplaceMember replaces member nodeID by the machine of the pending
// registration joinID (new hardware, or the same machine reinstalled): in
// one transaction the member is removed as RemoveMember removes it (its
// leaf stops counting, its OpenBao node token is queued for revocation,
// its release record forgotten, its node id and addresses freed) and the
// registration is approved with what the member had: node id, management
// address, networks, labels and az. Audited cluster.member.removed,
// join.approved and cluster.member.replaced (the old and new key pins,
// the reason). It answers the registration as it now is.
//
// Refused, changing nothing: no reason (400), an unknown member or join
// (404), the founder (409), a member whose join is still delivering or
// installing (409), a registration that is not pending or whose join
// token is for another role (409).
func (s *Service) ReplaceMember(by iam.Principal, nodeID, joinID, reason string) (wire.OperatorView, error) {
	if err := requiredReason(reason, "for the audit log"); err != nil {
		return wire.OperatorView{}, err
	}
	var out wire.OperatorView
	err := s.update(func(t *txn) error {
		m, err := t.mustMember(nodeID)
		if err != nil {
			return err
		}
		r, err := t.mustRecord(joinID)
		if err != nil {
			return err
		}
		if err := t.replaceable(m, &r); err != nil {
			return err
		}
		if err := t.replace(m, &r, actorOf(by), map[string]string{"reason": reason}); err != nil {
			return err
		}
		out, err = t.operatorView(joinID)
		return err
	})
	return out, err
}

// replaceable refuses, writing nothing, every replacement of m by r that
// replace would not carry through.
func (t *txn) replaceable(m cluster.Member, r *record) error {
	id, err := cluster.LoadIdentity(t.Tx)
	if err != nil {
		return err
	}
	if m.NodeID == id.FounderNodeID {
		return apierr.New(apierr.Conflict, "member %s is the founder: it cannot be replaced", m.NodeID)
	}
	if m.JoinID != "" {
		old, found, err := t.getRecord(m.JoinID)
		if err != nil {
			return err
		}
		if found && inTurn(old.State) {
			return apierr.New(apierr.Conflict, "member %s is still joining: its join %s is %s; cancel it with `stratum joins cancel %s`", m.NodeID, old.JoinID, old.State, old.JoinID)
		}
	}
	if r.State != wire.StatePending {
		return notApprovable(*r)
	}
	if r.Role != m.Role {
		return apierr.New(apierr.JoinApprovalRefused, "join %s's token is for role %s; member %s is %s", r.JoinID, r.Role, m.NodeID, m.Role)
	}
	_, _, err = t.approvable(r, memberAssignment(m), m.NodeID)
	return err
}

// memberAssignment is what m was assigned.
func memberAssignment(m cluster.Member) wire.Assignment {
	return normalized(wire.Assignment{NodeID: m.NodeID, AZ: m.AZ, MgmtIP: m.MgmtIP, Networks: m.Networks, Labels: m.Labels})
}

// replace removes m and approves r with m's assignment; replaceable has
// passed. details (the reason, an automatic replacement's evidence) go
// into every audit event of it.
func (t *txn) replace(m cluster.Member, r *record, actor string, details map[string]string) error {
	oldKey := ""
	if m.JoinID != "" {
		old, found, err := t.getRecord(m.JoinID)
		if err != nil {
			return err
		}
		if found {
			oldKey = old.KeyPin
		}
	}
	removed := map[string]string{"replacedBy": r.JoinID}
	for k, v := range details {
		removed[k] = v
	}
	if m.JoinID != "" {
		removed["joinId"] = m.JoinID
	}
	if err := t.removeMember(m, actor, removed); err != nil {
		return err
	}
	if err := t.settle(); err != nil {
		return err
	}
	evidence := map[string]string{"replaces": m.NodeID}
	for k, v := range details {
		evidence[k] = v
	}
	if err := t.approve(r, memberAssignment(m), actor, evidence); err != nil {
		return err
	}
	replaced := map[string]string{"oldKey": oldKey, "newKey": r.KeyPin, "oldJoinId": m.JoinID, "joinId": r.JoinID}
	for k, v := range details {
		replaced[k] = v
	}
	return t.Audit("cluster.member.replaced", actor, m.NodeID, replaced)
}

// DecodeReplace decodes POST /v1/admin/cluster/members/{nodeId}/replace:
// {"joinId": "...", "reason": "..."}, both required.
func DecodeReplace(body []byte) (joinID, reason string, err error) {
	var req struct {
		JoinID string `json:"joinId"`
		Reason string `json:"reason"`
	}
	err = strictjson.DecodeChecked(strictjson.OrEmptyObject(body), &req, "the request has problems", func() apierr.Fields {
		f := reasonProblems(req.Reason)
		if strings.TrimSpace(req.Reason) == "" {
			f.Add("reason", "required: say why, for the audit log")
		}
		if req.JoinID == "" {
			f.Add("joinId", "required: the pending registration of the machine that takes the member's place")
		}
		return f
	})
	return req.JoinID, req.Reason, err
}
