package httpapi

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"stratum/apierr"
	"stratum/iam"
	"stratum/store"
)

func (a *API) mountIAM() {
	m := a.admin
	m.handle(Route{Method: "POST", Path: "/v1/auth/login", Summary: "Log in with email and password; returns a 12-hour bearer token.", Auth: "none"}, a.login)
	m.handle(Route{Method: "GET", Path: "/v1/auth/self", Summary: "The caller: its subject (the acting session or token), its user and the actions its policy allows on each resource collection (what a console may offer).", Auth: "bearer"}, a.self)
	m.handle(Route{Method: "POST", Path: "/v1/iam/tokens", Summary: "Create an API token with an identity policy.", Action: "iam:CreateToken", Auth: "bearer"}, a.createAPIToken)
	m.handle(Route{Method: "GET", Path: "/v1/iam/tokens", Summary: "List API tokens (no secrets).", Action: "iam:ListTokens", Auth: "bearer"}, a.listAPITokens)
	m.handle(Route{Method: "DELETE", Path: "/v1/iam/tokens/:tokenId", Summary: "Revoke an API token and every token made under it.", Action: "iam:RevokeToken", Auth: "bearer"}, a.revokeAPIToken)
	a.mountSessions()
}

// passwordChecks bounds concurrent argon2id verifications.
var passwordChecks = make(chan struct{}, 2)

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func tooMany(wait time.Duration, format string) error {
	e := apierr.New(apierr.TooManyRequests, "%s", format)
	e.RetryAfter = int(wait/time.Second) + 1
	return e
}

// checkPassword verifies email's password, limited per account: only
// failures count, so the rightful user is not slowed by the limiter.
func (a *API) checkPassword(r *http.Request, email, password string) (iam.User, error) {
	account := "account:" + strings.ToLower(email)
	if ok, wait := a.AccountLimiter.Check(account, a.Now()); !ok {
		return iam.User{}, tooMany(wait, "too many failed logins for this account; try again later")
	}
	// The argon2id check (64 MiB, tens of ms) runs outside the write
	// transaction and at most two at a time, so a flood of logins neither
	// holds the store's one writer nor exhausts memory.
	select {
	case passwordChecks <- struct{}{}:
	case <-r.Context().Done():
		return iam.User{}, r.Context().Err()
	}
	var u iam.User
	err := a.DB.View(func(tx *store.Tx) error {
		var err error
		u, err = iam.CheckLogin(tx, email, password)
		return err
	})
	<-passwordChecks
	if apierr.CodeOf(err) == apierr.Unauthenticated {
		a.AccountLimiter.Fail(account, a.Now())
	}
	return u, err
}

func (a *API) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	source, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		source = r.RemoteAddr
	}
	if ok, wait := a.Limiter.Allow(source, a.Now()); !ok {
		return tooMany(wait, "too many login attempts from this address; try again later")
	}
	var req loginRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	u, err := a.checkPassword(r, req.Email, req.Password)
	if err != nil {
		return err
	}
	var token string
	var expires time.Time
	err = a.DB.Update(func(tx *store.Tx) error {
		var err error
		token, expires, err = iam.StartSession(tx, u, a.Now())
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": token, "expiresAt": expires})
	return nil
}

func (a *API) createAPIToken(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := a.authorize(r, "iam:CreateToken", iam.Resource(iam.ResIAMToken, "*"))
	if err != nil {
		return err
	}
	var req iam.CreateTokenRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	var secret string
	var view iam.TokenView
	err = a.DB.Update(func(tx *store.Tx) error {
		var err error
		secret, view, err = iam.CreateToken(tx, p, req, a.Now())
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": secret, "tokenId": view.ID, "name": view.Name, "expiresAt": view.ExpiresAt, "policy": view.Policy})
	return nil
}

func (a *API) listAPITokens(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := a.authorize(r, "iam:ListTokens", iam.Resource(iam.ResIAMToken, "*"))
	if err != nil {
		return err
	}
	var list []iam.TokenView
	err = a.DB.View(func(tx *store.Tx) error {
		var err error
		list, err = iam.ListTokens(tx)
		return err
	})
	if err != nil {
		return err
	}
	list = iam.Visible(p, list, "iam:ListTokens", func(t iam.TokenView) string { return iam.Resource(iam.ResIAMToken, t.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"tokens": list})
	return nil
}

func (a *API) revokeAPIToken(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id := ps.ByName("tokenId")
	p, err := a.authorize(r, "iam:RevokeToken", iam.Resource(iam.ResIAMToken, id))
	if err != nil {
		return err
	}
	err = a.DB.Update(func(tx *store.Tx) error { return iam.RevokeToken(tx, p, id, a.Now()) })
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
