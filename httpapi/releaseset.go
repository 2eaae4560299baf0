package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"stratum/iam"
	"stratum/releaseset"
)

// mountReleaseSet adds the release set endpoints.
func (a *API) mountReleaseSet() {
	svc := a.ReleaseSet
	a.admin.handle(Route{Method: "GET", Path: "/v1/admin/upgrades/release", Summary: "The cluster's release set: every node's release, skew and drift (gzip/zstd when accepted).", Action: "upgrade:DescribeRelease", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			if _, err := a.authorize(r, "upgrade:DescribeRelease", iam.Resource(iam.ResRelease, "*")); err != nil {
				return err
			}
			ans, err := svc.Answer()
			if err != nil {
				return err
			}
			// Once the body started, a failed write can only be logged.
			if err := writeAnswer(w, r, ans); err != nil {
				a.log.Debug("release set answer cut", "err", err)
			}
			return nil
		})
	a.admin.handle(Route{Method: "PUT", Path: "/v1/admin/cluster/release", Summary: "Set the admission release joiners are admitted on; lowering it needs allowDowngrade.", Action: "upgrade:SetClusterRelease", Auth: "bearer"},
		func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
			p, err := a.authorize(r, "upgrade:SetClusterRelease", iam.Resource(iam.ResRelease, "cluster"))
			if err != nil {
				return err
			}
			var req releaseset.SetAdmissionRequest
			if err := decodeJSON(r, &req); err != nil {
				return err
			}
			v, err := svc.SetAdmission(p.Subject, req)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, v)
			return nil
		})
	a.admin.handle(Route{Method: "PUT", Path: "/v1/cluster/nodes/:nodeId/release", Summary: "Record a node's release (the node's transport leaf, or a bearer token with upgrade:RecordRelease).", Action: "upgrade:RecordRelease", Auth: "node-or-bearer"},
		func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
			node := ps.ByName("nodeId")
			actor, err := a.nodeOrBearer(r, node, "upgrade:RecordRelease", iam.Resource(iam.ResNode, node))
			if err != nil {
				return err
			}
			body, err := readBody(r, RecordBodyLimit)
			if err != nil {
				return err
			}
			req, err := releaseset.DecodeRecordRequest(body)
			if err != nil {
				return err
			}
			if err := svc.Record(actor, node, req); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		})
}
