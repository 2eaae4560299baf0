package httpapi

import (
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"stratum/apierr"
	"stratum/iam"
)

func (a *API) mountAudit() {
	a.admin.handle(Route{Method: "GET", Path: "/v1/admin/audit", Summary: "Read the hash-chained audit log (after=SEQ, limit=N up to 1000).", Action: "audit:ReadAudit", Auth: "bearer"}, a.readAudit)
}

func (a *API) readAudit(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := a.authorize(r, "audit:ReadAudit", iam.Resource(iam.ResAudit, "*")); err != nil {
		return err
	}
	q := r.URL.Query()
	var f apierr.Fields
	after, limit := uint64(0), 100
	if s := q.Get("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			f.Add("after", "must be a non-negative integer")
		}
		after = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			f.Add("limit", "must be an integer from 1 to 1000")
		}
		limit = n
	}
	if err := f.Err("bad query parameters"); err != nil {
		return err
	}
	events, err := a.DB.AuditEvents(after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events})
	return nil
}
