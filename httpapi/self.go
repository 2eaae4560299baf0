package httpapi

import "net/http"

// self answers who the caller is and what it may do, so the console shows
// only the controls the API would accept.
func (a *API) self(w http.ResponseWriter, r *http.Request, c *call) error {
	p := c.principal
	writeJSON(w, http.StatusOK, map[string]any{"subject": p.Subject, "user": p.User, "actions": p.AllowedActions()})
	return nil
}
