package httpapi

import (
	"net"
	"net/http"
	"strings"
	"time"

	"stratum/apierr"
	"stratum/iam"
	"stratum/store"
)

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

func (a *API) login(w http.ResponseWriter, r *http.Request, _ *call) error {
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

func (a *API) createAPIToken(w http.ResponseWriter, r *http.Request, c *call) error {
	p := c.principal
	var req iam.CreateTokenRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	var secret string
	var view iam.TokenView
	err := a.DB.Update(func(tx *store.Tx) error {
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

func (a *API) listAPITokens(w http.ResponseWriter, r *http.Request, c *call) error {
	var list []iam.TokenView
	err := a.DB.View(func(tx *store.Tx) error {
		var err error
		list, err = iam.ListTokens(tx)
		return err
	})
	if err != nil {
		return err
	}
	list = iam.Visible(c.principal, list, c.action, func(t iam.TokenView) string { return iam.Resource(iam.ResIAMToken, t.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"tokens": list})
	return nil
}

func (a *API) revokeAPIToken(w http.ResponseWriter, r *http.Request, c *call) error {
	id := c.params.ByName("tokenId")
	err := a.DB.Update(func(tx *store.Tx) error { return iam.RevokeToken(tx, c.principal, id, a.Now()) })
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
