package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"stratum/apierr"
	"stratum/store"
)

func (a *API) readAudit(w http.ResponseWriter, r *http.Request, _ *call) error {
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
	events, err := a.Audit.AuditEvents(after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events})
	return nil
}

// verifyAudit answers the chain's status as what `stratum audit verify`
// checks. A broken chain is a finding, not a failed request: 200 with
// intact false and the first broken link (sequence numbers, no content).
func (a *API) verifyAudit(w http.ResponseWriter, r *http.Request, _ *call) error {
	n, err := a.Audit.VerifyAudit()
	if errors.Is(err, store.ErrClosed) {
		return err
	}
	out := map[string]any{"intact": err == nil, "events": n}
	if err != nil {
		out["problem"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
