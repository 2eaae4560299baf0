package iam

import (
	"strings"
	"time"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/store"
	"stratum/wire"
)

// Token kinds.
const (
	KindSession = "session"
	KindAPI     = "api"
)

// Token is a stored bearer token; the secret itself is kept only hashed.
type Token struct {
	ID      string `json:"tokenId"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Subject string `json:"subject"` // the user the token acts for
	Policy  Policy `json:"policy"`
	Hash    string `json:"hash"`
	// Parent is the token (session or API token) that created this one;
	// empty for a root: a login session, or a token made before parents
	// were recorded. Revoking a token revokes every descendant.
	Parent string `json:"parent,omitempty"`
	// CreatedBy is the acting principal that made it ("<email> via
	// session <id>", "<email> via token <id>", "user:<email>").
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
}

// View hides the hash.
func (t Token) View() wire.TokenView {
	return wire.TokenView{ID: t.ID, Name: t.Name, Kind: t.Kind, Subject: t.Subject, Policy: wire.Policy(t.Policy), Parent: t.Parent, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, Revoked: !t.RevokedAt.IsZero()}
}

// Actor names the token as the audit log, approvedBy and createdBy name
// an acting principal: the person first, then how they acted (SPEC 17),
// "admin@example.com via session tok-ab12cd34"; "token:<id>" only for a
// token no person stands behind.
func (t Token) Actor() string {
	how := "token"
	if t.Kind == KindSession {
		how = "session"
	}
	if t.Subject == "" {
		return how + ":" + t.ID
	}
	return t.Subject + " via " + how + " " + t.ID
}

// tokenPrefix marks stratum API bearer tokens: sat1.<id>.<secret>.
const tokenPrefix = "sat1"

// TokenID is the id a bearer token (sat1.<id>.<secret>) names, as a
// session or token list shows it; ok is false for anything else. It
// authenticates nothing.
func TokenID(bearer string) (id string, ok bool) {
	parts := strings.Split(bearer, ".")
	if len(parts) != 3 || parts[0] != tokenPrefix || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// issueToken stores a new token and returns its one-time secret form.
func issueToken(tx *store.Tx, t Token) (string, Token, error) {
	t.ID = crypto.RandomID("tok-", 10)
	secret := tokenPrefix + "." + t.ID + "." + crypto.RandomSecret(20)
	t.Hash = crypto.HashToken(secret)
	if err := bucketTokens.Put(tx, t.ID, t); err != nil {
		return "", t, err
	}
	return secret, t, nil
}

// Principal is who a request acts as.
type Principal struct {
	// Subject is the acting principal as the audit log names it:
	// "<email> via session <id>", "<email> via token <id>", "user:<email>"
	// or "node:<id>".
	Subject string
	// User is the email of the user behind a session or token.
	User    string
	TokenID string
	Kind    string
	Policy  Policy
	// ExpiresAt bounds what the principal may create; zero is unbounded
	// (internal callers only: every bearer has an expiry).
	ExpiresAt time.Time
	// MustChangePassword is set on a session whose account must change
	// its password before anything else (SPEC 16.1).
	MustChangePassword bool
}

// decodedRows keeps the token and account rows authenticate decoded: a
// token is read on every request it carries, and decoding its row and
// its account's was most of a request's authentication. A row read
// again is decoded again only when its bytes changed (a revocation, a
// password change); the values are shared, never modified.
type decodedRows struct {
	tokens store.Decoded[Token]
	users  store.Decoded[User]
}

// authenticate resolves a bearer token; every failure is the same
// UNAUTHENTICATED so a caller learns nothing about which part was wrong.
func authenticate(tx *store.Tx, bearer string, now time.Time, rows *decodedRows) (Principal, error) {
	fail := apierr.New(apierr.Unauthenticated, "missing, expired or invalid bearer token")
	id, ok := TokenID(bearer)
	if !ok {
		return Principal{}, fail
	}
	t, found, err := bucketTokens.GetDecoded(tx, id, &rows.tokens)
	if err != nil {
		return Principal{}, err
	}
	if !found {
		// Compare anyway so a miss costs what a hit costs.
		crypto.TokenMatches(bearer, crypto.HashToken("absent"))
		return Principal{}, fail
	}
	if !crypto.TokenMatches(bearer, t.Hash) || !t.RevokedAt.IsZero() || !now.Before(t.ExpiresAt) {
		return Principal{}, fail
	}
	p := Principal{Subject: t.Actor(), User: t.Subject, TokenID: t.ID, Kind: t.Kind, Policy: t.Policy, ExpiresAt: t.ExpiresAt}
	if t.Kind == KindSession || t.Subject != "" {
		// A token acts for its account: an account that must change its
		// password holds its API tokens as it holds its sessions (SPEC
		// 16.1). A session needs its account; so does any token whose
		// account's row is there but fails its MAC (SPEC 16.2), rather
		// than keeping its policy without the account's must-change flag.
		u, found, err := bucketUsers.GetDecoded(tx, t.Subject, &rows.users)
		if err != nil {
			return Principal{}, err
		}
		if !found && (t.Kind == KindSession || store.Named(bucketUsers.Name()).Occupied(tx, t.Subject)) {
			return Principal{}, fail
		}
		p.MustChangePassword = u.MustChangePassword
	}
	return p, nil
}

// PasswordChangeFirst is the refusal of any request but a password change
// or a logout from a session whose account must change its password.
func PasswordChangeFirst() error {
	e := apierr.New(apierr.Forbidden, "this account must change its password first: POST /v1/auth/password with currentPassword and newPassword (`stratum login` asks for it)")
	e.Details = map[string]any{"mustChangePassword": true}
	return e
}

// Authorize checks p may perform action on resource.
func (p Principal) Authorize(action, resource string) error {
	if p.Policy.Allows(action, resource) {
		return nil
	}
	return apierr.New(apierr.Forbidden, "not authorized to perform %s on %s", action, resource)
}

// createToken validates the request and stores an API token.
func createToken(tx *store.Tx, by Principal, req wire.CreateTokenRequest, now time.Time) (string, wire.TokenView, error) {
	var f apierr.Fields
	if req.Name == "" || len(req.Name) > 128 {
		f.Add("name", "required, at most 128 characters")
	}
	expires := now.Add(30 * 24 * time.Hour)
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 || d > 366*24*time.Hour {
			f.Add("ttl", "a duration such as 24h, at most 8784h")
		} else {
			expires = now.Add(d)
		}
	}
	if len(req.Policy) == 0 {
		f.Add("policy", "required")
	}
	if err := f.Err("the token request has problems"); err != nil {
		return "", wire.TokenView{}, err
	}
	pol, err := ParsePolicy(req.Policy)
	if err != nil {
		return "", wire.TokenView{}, err
	}
	// The caller was authenticated in an earlier transaction: a token
	// revoked (or a session logged out) since then must not leave behind
	// a child that no cascade will ever reach.
	if by.TokenID != "" {
		caller, found, err := bucketTokens.Get(tx, by.TokenID)
		if err != nil {
			return "", wire.TokenView{}, err
		}
		if !found || !caller.RevokedAt.IsZero() || !now.Before(caller.ExpiresAt) {
			return "", wire.TokenView{}, apierr.New(apierr.Unauthenticated, "the calling token was revoked or expired while the request was made")
		}
	}
	if err := WithinPolicy(pol, by.Policy); err != nil {
		return "", wire.TokenView{}, err
	}
	if !by.ExpiresAt.IsZero() && expires.After(by.ExpiresAt) {
		if req.TTL != "" {
			return "", wire.TokenView{}, apierr.New(apierr.Forbidden, "the new token would outlive the calling token, which expires at %s: ask for a shorter ttl", by.ExpiresAt.UTC().Format(time.RFC3339))
		}
		expires = by.ExpiresAt // the default lifetime shrinks to the caller's
	}
	user := by.User
	if user == "" {
		user = by.Subject
	}
	secret, t, err := issueToken(tx, Token{Name: req.Name, Kind: KindAPI, Subject: user, Policy: pol, Parent: by.TokenID, CreatedBy: by.Subject, CreatedAt: now.UTC(), ExpiresAt: expires.UTC()})
	if err != nil {
		return "", wire.TokenView{}, err
	}
	data := map[string]string{"name": t.Name, "user": user}
	if t.Parent != "" {
		data["parent"] = t.Parent
	}
	if err := tx.Audit("iam.token.created", by.Subject, t.ID, data); err != nil {
		return "", wire.TokenView{}, err
	}
	return secret, t.View(), nil
}

// listTokens lists API tokens (sessions excluded).
func listTokens(tx *store.Tx) ([]wire.TokenView, error) {
	return listKind(tx, KindAPI)
}

func listKind(tx *store.Tx, kind string) ([]wire.TokenView, error) {
	out := []wire.TokenView{}
	err := forEachToken(tx, func(t Token) error {
		if t.Kind == kind {
			out = append(out, t.View())
		}
		return nil
	})
	return out, err
}

// revokeToken revokes an API token.
func revokeToken(tx *store.Tx, by Principal, id string, now time.Time) error {
	t, found, err := bucketTokens.Get(tx, id)
	if err != nil {
		return err
	}
	if !found || t.Kind != KindAPI {
		return apierr.New(apierr.NotFound, "no API token %s", id)
	}
	if !t.RevokedAt.IsZero() {
		return apierr.New(apierr.Conflict, "token %s is already revoked", id)
	}
	return revokeWithDescendants(tx, by.Subject, t, "iam.token.revoked", now)
}
