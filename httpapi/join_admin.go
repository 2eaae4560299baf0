package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"stratum/apierr"
	"stratum/iam"
	"stratum/join"
)

// mountJoinAdmin adds the operator's join endpoints and membership.
func (a *API) mountJoinAdmin() {
	svc := a.JoinAdmin
	m := a.admin
	tokens := iam.Resource(iam.ResJoinToken, "*")
	m.handle(Route{Method: "POST", Path: "/v1/admin/join/tokens", Summary: "Create a join token; the answer carries the secret and the exact join command once.", Action: "join:CreateJoinToken", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			p, err := a.authorize(r, "join:CreateJoinToken", tokens)
			if err != nil {
				return err
			}
			body, err := readBody(r, DefaultBodyLimit)
			if err != nil {
				return err
			}
			req, err := join.DecodeCreateTokenRequest(body)
			if err != nil {
				return err
			}
			out, err := svc.CreateToken(p, req)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusCreated, out)
			return nil
		})
	m.handle(Route{Method: "GET", Path: "/v1/admin/join/tokens", Summary: "List join tokens (no secrets).", Action: "join:ListJoinTokens", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			p, err := a.authorize(r, "join:ListJoinTokens", tokens)
			if err != nil {
				return err
			}
			list, err := svc.ListTokens()
			if err != nil {
				return err
			}
			list = iam.Visible(p, list, "join:ListJoinTokens", func(t join.TokenView) string { return iam.Resource(iam.ResJoinToken, t.TokenID) })
			writeJSON(w, http.StatusOK, map[string]any{"tokens": list})
			return nil
		})
	m.handle(Route{Method: "DELETE", Path: "/v1/admin/join/tokens/:tokenId", Summary: "Revoke a join token.", Action: "join:RevokeJoinToken", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
			id := ps.ByName("tokenId")
			p, err := a.authorize(r, "join:RevokeJoinToken", iam.Resource(iam.ResJoinToken, id))
			if err != nil {
				return err
			}
			if err := svc.RevokeToken(p, id); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		})
	m.handle(Route{Method: "GET", Path: "/v1/admin/join/registrations", Summary: "List registrations (state= filters); with index (from an earlier answer) and wait (seconds, at most 60) it holds until the list differs from that index.", Action: "join:ListRegistrations", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			p, err := a.authorize(r, "join:ListRegistrations", iam.Resource(iam.ResJoinRegistration, "*"))
			if err != nil {
				return err
			}
			wait, state, err := waitParams(r)
			if err != nil {
				return err
			}
			holdLongPoll(w, wait)
			list, index, err := svc.WaitList(r.Context(), state, r.URL.Query().Get("index"), wait)
			if err != nil {
				return err
			}
			list = iam.Visible(p, list, "join:ListRegistrations", func(v join.OperatorView) string { return iam.Resource(iam.ResJoinRegistration, v.JoinID) })
			writeJSON(w, http.StatusOK, map[string]any{"registrations": list, "index": index})
			return nil
		})
	m.handle(Route{Method: "GET", Path: "/v1/admin/join/registrations/:joinId", Summary: "One registration, the operator's view.", Action: "join:GetRegistration", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
			id := ps.ByName("joinId")
			if _, err := a.authorize(r, "join:GetRegistration", iam.Resource(iam.ResJoinRegistration, id)); err != nil {
				return err
			}
			v, err := svc.Get(id)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, v)
			return nil
		})
	type decision struct {
		verb, action, summary string
		call                  func(p iam.Principal, id string, body []byte) (join.OperatorView, error)
	}
	for _, d := range []decision{
		{"approve", "join:ApproveNodeJoin", "Approve a pending registration with its assignment.", func(p iam.Principal, id string, body []byte) (join.OperatorView, error) {
			as, err := join.DecodeAssignment(body)
			if err != nil {
				return join.OperatorView{}, err
			}
			return svc.Approve(p, id, as)
		}},
		{"reject", "join:RejectNodeJoin", "Reject a pending, needs-upgrade or approved registration.", func(p iam.Principal, id string, body []byte) (join.OperatorView, error) {
			reason, err := join.DecodeReason(body)
			if err != nil {
				return join.OperatorView{}, err
			}
			return svc.Reject(p, id, reason)
		}},
		{"cancel", "join:CancelNodeJoin", "Cancel a delivering or installing join: it fails and its member is removed.", func(p iam.Principal, id string, body []byte) (join.OperatorView, error) {
			reason, err := join.DecodeReason(body)
			if err != nil {
				return join.OperatorView{}, err
			}
			return svc.Cancel(p, id, reason)
		}},
	} {
		m.handle(Route{Method: "POST", Path: "/v1/admin/join/registrations/:joinId/" + d.verb, Summary: d.summary, Action: d.action, Auth: "bearer"},
			func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
				id := ps.ByName("joinId")
				p, err := a.authorize(r, d.action, iam.Resource(iam.ResJoinRegistration, id))
				if err != nil {
					return err
				}
				body, err := readBody(r, DefaultBodyLimit)
				if err != nil {
					return err
				}
				v, err := d.call(p, id, body)
				if err != nil {
					return err
				}
				writeJSON(w, http.StatusOK, v)
				return nil
			})
	}
	m.handle(Route{Method: "GET", Path: "/v1/admin/cluster/members", Summary: "The members and the current membership generation.", Action: "cluster:ListMembers", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			p, err := a.authorize(r, "cluster:ListMembers", iam.Resource(iam.ResMember, "*"))
			if err != nil {
				return err
			}
			v, err := svc.Members()
			if err != nil {
				return err
			}
			v.Members = iam.Visible(p, v.Members, "cluster:ListMembers", func(m join.MemberView) string { return iam.Resource(iam.ResMember, m.NodeID) })
			writeJSON(w, http.StatusOK, v)
			return nil
		})
	m.handle(Route{Method: "GET", Path: "/v1/cluster/members", Summary: "A node's membership long-poll (its transport leaf): the members list, answered when the generation differs from generation or wait (seconds, at most 60) passes.", Auth: "node"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			node, err := a.nodeLeaf(r)
			if err != nil {
				return err
			}
			if node == "" {
				return apierr.New(apierr.Unauthenticated, "this endpoint needs the node's transport certificate, issued by the cluster CA")
			}
			wait, err := waitParam(r)
			if err != nil {
				return err
			}
			generation, err := generationParam(r)
			if err != nil {
				return err
			}
			if wait > 0 {
				_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
			}
			v, err := svc.WaitMembers(r.Context(), node, generation, wait)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, v)
			return nil
		})
	m.handle(Route{Method: "PUT", Path: "/v1/cluster/members/:nodeId/applied", Summary: "A node reports the membership generation it applied (its transport leaf; CommonName must equal nodeId).", Auth: "node"},
		func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
			node := ps.ByName("nodeId")
			if err := a.requireNode(r, node); err != nil {
				return err
			}
			body, err := readBody(r, DefaultBodyLimit)
			if err != nil {
				return err
			}
			g, err := join.DecodeApplied(body)
			if err != nil {
				return err
			}
			v, err := svc.Applied(node, g)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, v)
			return nil
		})
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
