package httpapi

import (
	"net"
	"net/http"

	"stratum/iam"
	"stratum/wire"
)

func (a *API) login(w http.ResponseWriter, r *http.Request, _ *call) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	source, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		source = r.RemoteAddr
	}
	var req wire.LoginRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	sess, err := a.Identity.Login(r.Context(), req.Email, req.Password, iam.LoginSource(source))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (a *API) createAPIToken(w http.ResponseWriter, r *http.Request, c *call) error {
	var req wire.CreateTokenRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	secret, view, err := a.Identity.CreateToken(c.principal, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": secret, "tokenId": view.ID, "name": view.Name, "expiresAt": view.ExpiresAt, "policy": view.Policy})
	return nil
}

func (a *API) listAPITokens(w http.ResponseWriter, r *http.Request, c *call) error {
	list, err := a.Identity.ListTokens()
	if err != nil {
		return err
	}
	list = iam.Visible(c.principal, list, c.action, func(t wire.TokenView) string { return iam.Resource(iam.ResIAMToken, t.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"tokens": list})
	return nil
}

func (a *API) revokeAPIToken(w http.ResponseWriter, r *http.Request, c *call) error {
	id := c.params.ByName("tokenId")
	if err := a.Identity.RevokeToken(c.principal, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
