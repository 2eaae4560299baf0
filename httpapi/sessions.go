package httpapi

import (
	"net/http"

	"stratum/iam"
	"stratum/wire"
)

func (a *API) signInHint(w http.ResponseWriter, _ *http.Request, _ *call) error {
	writeJSON(w, http.StatusOK, wire.SignInHint{BootstrapCredentials: a.BootstrapCredentials != nil && a.BootstrapCredentials()})
	return nil
}

func (a *API) logout(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := a.Identity.Logout(c.principal); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) changePassword(w http.ResponseWriter, r *http.Request, c *call) error {
	var req wire.PasswordChange
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if err := a.Identity.ChangePassword(r.Context(), c.principal, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request, c *call) error {
	list, err := a.Identity.ListSessions()
	if err != nil {
		return err
	}
	list = iam.Visible(c.principal, list, c.action, func(t wire.TokenView) string { return iam.Resource(iam.ResIAMSession, t.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
	return nil
}

func (a *API) revokeSession(w http.ResponseWriter, r *http.Request, c *call) error {
	id := c.params.ByName("sessionId")
	if err := a.Identity.RevokeSession(c.principal, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
