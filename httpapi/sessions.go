package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/iam"
	"stratum/store"
)

func (a *API) mountSessions() {
	m := a.admin
	m.handle(Route{Method: "POST", Path: "/v1/auth/logout", Summary: "End the calling login session (and every token made under it).", Auth: "bearer"}, a.logout)
	m.handle(Route{Method: "POST", Path: "/v1/auth/password", Summary: "Change the caller's password (at least 12 characters); ends every other session of that user.", Auth: "bearer"}, a.changePassword)
	m.handle(Route{Method: "GET", Path: "/v1/iam/sessions", Summary: "List live login sessions (no secrets).", Action: "iam:ListSessions", Auth: "bearer"}, a.listSessions)
	m.handle(Route{Method: "DELETE", Path: "/v1/iam/sessions/:sessionId", Summary: "End a login session and every token made under it.", Action: "iam:RevokeSession", Auth: "bearer"}, a.revokeSession)
}

func (a *API) logout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := a.principal(r)
	if err != nil {
		return err
	}
	if err := a.DB.Update(func(tx *store.Tx) error { return iam.Logout(tx, p, a.Now()) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) changePassword(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := a.principal(r)
	if err != nil {
		return err
	}
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

func (a *API) listSessions(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := a.authorize(r, "iam:ListSessions", iam.Resource(iam.ResIAMSession, "*"))
	if err != nil {
		return err
	}
	var list []iam.TokenView
	err = a.DB.View(func(tx *store.Tx) error {
		var err error
		list, err = iam.ListSessions(tx, a.Now())
		return err
	})
	if err != nil {
		return err
	}
	list = iam.Visible(p, list, "iam:ListSessions", func(t iam.TokenView) string { return iam.Resource(iam.ResIAMSession, t.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
	return nil
}

func (a *API) revokeSession(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id := ps.ByName("sessionId")
	p, err := a.authorize(r, "iam:RevokeSession", iam.Resource(iam.ResIAMSession, id))
	if err != nil {
		return err
	}
	if err := a.DB.Update(func(tx *store.Tx) error { return iam.RevokeSession(tx, p, id, a.Now()) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
