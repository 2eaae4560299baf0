package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// self answers who the caller is and what it may do, so the console shows
// only the controls the API would accept.
func (a *API) self(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := a.principal(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"subject": p.Subject, "user": p.User, "actions": p.AllowedActions()})
	return nil
}
