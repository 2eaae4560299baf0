package httpapi

import (
	"net/http"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/iam"
	"stratum/store"
)

func (a *API) logout(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := a.DB.Update(func(tx *store.Tx) error { return iam.Logout(tx, c.principal, a.Now()) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) changePassword(w http.ResponseWriter, r *http.Request, c *call) error {
	p := c.principal
	var req iam.PasswordChange
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if err := req.Validate(p); err != nil {
		return err
	}
	u, err := a.checkPassword(r, p.User, req.CurrentPassword)
	if apierr.CodeOf(err) == apierr.Unauthenticated {
		// The session is good; the password it sent is not.
		return apierr.WithFields(apierr.Forbidden, "the current password is wrong", []apierr.FieldError{{Field: "currentPassword", Message: "does not match"}})
	}
	if err != nil {
		return err
	}
	passwordChecks <- struct{}{}
	hash := crypto.HashPassword(req.NewPassword)
	<-passwordChecks
	if err := a.DB.Update(func(tx *store.Tx) error { return iam.SetPassword(tx, p, u, hash, a.Now()) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request, c *call) error {
	var list []iam.TokenView
	err := a.DB.View(func(tx *store.Tx) error {
		var err error
		list, err = iam.ListSessions(tx, a.Now())
		return err
	})
	if err != nil {
		return err
	}
	list = iam.Visible(c.principal, list, c.action, func(t iam.TokenView) string { return iam.Resource(iam.ResIAMSession, t.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
	return nil
}

func (a *API) revokeSession(w http.ResponseWriter, r *http.Request, c *call) error {
	id := c.params.ByName("sessionId")
	if err := a.DB.Update(func(tx *store.Tx) error { return iam.RevokeSession(tx, c.principal, id, a.Now()) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
