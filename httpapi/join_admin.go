package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/iam"
	"stratum/join"
	"stratum/wire"
)

// The operator's join endpoints and membership (JoinAdmin).

func (a *API) createJoinToken(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	req, err := join.DecodeCreateTokenRequest(body)
	if err != nil {
		return err
	}
	out, err := a.JoinAdmin.CreateToken(c.principal, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (a *API) listJoinTokens(w http.ResponseWriter, r *http.Request, c *call) error {
	list, err := a.JoinAdmin.ListTokens()
	if err != nil {
		return err
	}
	list = iam.Visible(c.principal, list, c.action, func(t wire.JoinTokenView) string { return iam.Resource(iam.ResJoinToken, t.TokenID) })
	writeJSON(w, http.StatusOK, map[string]any{"tokens": list})
	return nil
}

func (a *API) revokeJoinToken(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := a.JoinAdmin.RevokeToken(c.principal, c.params.ByName("tokenId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listRegistrations(w http.ResponseWriter, r *http.Request, c *call) error {
	wait, state, err := waitParams(r)
	if err != nil {
		return err
	}
	holdLongPoll(w, wait)
	list, index, err := a.JoinAdmin.WaitList(r.Context(), state, r.URL.Query().Get("index"), wait)
	if err != nil {
		return err
	}
	list = iam.Visible(c.principal, list, c.action, func(v wire.OperatorView) string { return iam.Resource(iam.ResJoinRegistration, v.JoinID) })
	writeJSON(w, http.StatusOK, map[string]any{"registrations": list, "index": index})
	return nil
}

func (a *API) getRegistration(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := a.JoinAdmin.Get(c.params.ByName("joinId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (a *API) approveJoin(w http.ResponseWriter, r *http.Request, c *call) error {
	return a.decide(w, r, c, func(id string, body []byte) (wire.OperatorView, error) {
		as, err := join.DecodeAssignment(body)
		if err != nil {
			return wire.OperatorView{}, err
		}
		return a.JoinAdmin.Approve(c.principal, id, as)
	})
}

func (a *API) rejectJoin(w http.ResponseWriter, r *http.Request, c *call) error {
	return a.decideWithReason(w, r, c, a.JoinAdmin.Reject)
}

func (a *API) cancelJoin(w http.ResponseWriter, r *http.Request, c *call) error {
	return a.decideWithReason(w, r, c, a.JoinAdmin.Cancel)
}

// decideWithReason runs a decision whose body is only its reason.
func (a *API) decideWithReason(w http.ResponseWriter, r *http.Request, c *call, act func(by iam.Principal, joinID, reason string) (wire.OperatorView, error)) error {
	return a.decide(w, r, c, func(id string, body []byte) (wire.OperatorView, error) {
		reason, err := join.DecodeReason(body)
		if err != nil {
			return wire.OperatorView{}, err
		}
		return act(c.principal, id, reason)
	})
}

// decide runs an operator's decision on the registration joinId with the
// request body, answering the registration as it now is.
func (a *API) decide(w http.ResponseWriter, r *http.Request, c *call, run func(joinID string, body []byte) (wire.OperatorView, error)) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	v, err := run(c.params.ByName("joinId"), body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (a *API) listMembers(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := a.JoinAdmin.Members()
	if err != nil {
		return err
	}
	v.Members = iam.Visible(c.principal, v.Members, c.action, func(m wire.MemberView) string { return iam.Resource(iam.ResMember, m.NodeID) })
	writeJSON(w, http.StatusOK, v)
	return nil
}

// removeMember removes a member for good; the body is only its reason.
func (a *API) removeMember(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	reason, err := join.DecodeReason(body)
	if err != nil {
		return err
	}
	v, err := a.JoinAdmin.RemoveMember(c.principal, c.params.ByName("nodeId"), reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// watchMembers is a node's membership long-poll.
func (a *API) watchMembers(w http.ResponseWriter, r *http.Request, c *call) error {
	wait, err := waitParam(r)
	if err != nil {
		return err
	}
	generation, err := generationParam(r)
	if err != nil {
		return err
	}
	holdLongPoll(w, wait)
	v, err := a.JoinAdmin.WaitMembers(r.Context(), c.node, generation, wait)
	if err != nil {
		return err
	}
	// The same bytes answer every node within a generation.
	return writeShared(w, r, v.Body, &a.membersEncoded)
}

func (a *API) reportApplied(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	g, err := join.DecodeApplied(body)
	if err != nil {
		return err
	}
	v, err := a.JoinAdmin.Applied(c.node, g)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// renewNodeLeaf issues the calling node a new transport leaf for the
// public key it sent (authNode: its current leaf, CommonName = nodeId).
func (a *API) renewNodeLeaf(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(r, DefaultBodyLimit)
	if err != nil {
		return err
	}
	pub, err := join.DecodeNodeLeafRenewal(body)
	if err != nil {
		return err
	}
	leaf, err := a.JoinAdmin.RenewNodeLeaf(c.node, cluster.LeafSerial(verifiedLeaf(r)), pub)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, leaf)
	return nil
}

// generationParam parses generation: the membership generation the node
// applied last; absent means none (answer at once).
func generationParam(r *http.Request) (uint64, error) {
	s, ok := r.URL.Query()["generation"]
	if !ok {
		return 0, nil
	}
	g, err := strconv.ParseUint(s[0], 10, 64)
	if err != nil || strings.Trim(s[0], "0123456789") != "" {
		var f apierr.Fields
		f.Add("generation", "must be a whole, non-negative number")
		return 0, f.Err("bad query parameters")
	}
	return g, nil
}
