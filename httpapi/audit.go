package httpapi

import (
	"net/http"
	"strconv"

	"stratum/apierr"
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
	events, err := a.Audit.Events(after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events})
	return nil
}

// verifyAudit answers the chain's verdict as what `stratum audit verify`
// checks: a broken chain is 200 with intact false and the first broken
// link.
func (a *API) verifyAudit(w http.ResponseWriter, r *http.Request, _ *call) error {
	v, err := a.Audit.Verify()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
