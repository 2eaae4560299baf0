package iam

import (
	"strconv"
	"time"

	"stratum/apierr"
	"stratum/store"
	"stratum/wire"
)

// listSessions lists the login sessions that have not expired, without
// their secrets.
func listSessions(tx *store.Tx, now time.Time) ([]wire.TokenView, error) {
	all, err := listKind(tx, KindSession)
	live := all[:0]
	for _, s := range all {
		if now.Before(s.ExpiresAt) {
			live = append(live, s)
		}
	}
	return live, err
}

// revokeSession ends the session id and every token made under it.
func revokeSession(tx *store.Tx, by Principal, id string, now time.Time) error {
	t, found, err := bucketTokens.Get(tx, id)
	if err != nil {
		return err
	}
	if !found || t.Kind != KindSession || !now.Before(t.ExpiresAt) {
		return apierr.New(apierr.NotFound, "no live session %s", id)
	}
	if !t.RevokedAt.IsZero() {
		return apierr.New(apierr.Conflict, "session %s has already ended", id)
	}
	return revokeWithDescendants(tx, by.Subject, t, "iam.session.revoked", now)
}

// logout ends the caller's own session.
func logout(tx *store.Tx, by Principal, now time.Time) error {
	if by.Kind != KindSession {
		return apierr.New(apierr.Forbidden, "logout ends a login session; an API token is revoked with DELETE /v1/iam/tokens/{tokenId}")
	}
	t, found, err := bucketTokens.Get(tx, by.TokenID)
	if err != nil {
		return err
	}
	if !found || !t.RevokedAt.IsZero() {
		return apierr.New(apierr.Unauthenticated, "missing, expired or invalid bearer token")
	}
	return revokeWithDescendants(tx, by.Subject, t, "iam.logout", now)
}

// MinPasswordLength is the shortest password a user may choose.
const MinPasswordLength = 12

// validatePasswordChange lists every problem of the request; the current
// password is checked later, against the stored hash.
func validatePasswordChange(c wire.PasswordChange, by Principal) error {
	if by.Kind != KindSession {
		return apierr.New(apierr.Forbidden, "a password is changed from a login session, not with an API token")
	}
	var f apierr.Fields
	if c.CurrentPassword == "" {
		f.Add("currentPassword", "required")
	}
	if len(c.NewPassword) < MinPasswordLength || len(c.NewPassword) > 1024 {
		f.Add("newPassword", "from %d to 1024 characters", MinPasswordLength)
	} else if c.NewPassword == c.CurrentPassword {
		f.Add("newPassword", "must differ from the current password")
	}
	return f.Err("the password change has problems")
}

// setPassword stores newHash for the caller's user, whose current password
// was checked against checked (the user as read then), and ends every
// other session of that user. A password changed in between is refused.
func setPassword(tx *store.Tx, by Principal, checked User, newHash string, now time.Time) error {
	u, found, err := bucketUsers.Get(tx, checked.Email)
	if err != nil {
		return err
	}
	if !found || u.PasswordHash != checked.PasswordHash {
		return apierr.New(apierr.Conflict, "the password changed while this request was checked; try again")
	}
	u.PasswordHash = newHash
	u.MustChangePassword = false
	if err := bucketUsers.Put(tx, u.Email, u); err != nil {
		return err
	}
	var others []Token
	err = forEachToken(tx, func(t Token) error {
		if t.Kind == KindSession && t.Subject == u.Email && t.ID != by.TokenID && t.RevokedAt.IsZero() && now.Before(t.ExpiresAt) {
			others = append(others, t)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range others {
		if err := revokeWithDescendants(tx, by.Subject, t, "iam.session.revoked", now); err != nil {
			return err
		}
	}
	return tx.Audit("iam.password.changed", by.Subject, "user:"+u.Email, map[string]string{"sessionsEnded": strconv.Itoa(len(others))})
}
