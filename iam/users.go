package iam

import (
	"strings"
	"sync"
	"time"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/store"
)

// SessionTTL is how long a login token lives.
const SessionTTL = 12 * time.Hour

// User is an operator who logs in with a password.
type User struct {
	Email        string    `json:"email"`
	PasswordHash string    `json:"passwordHash"`
	CreatedAt    time.Time `json:"createdAt"`
	// MustChangePassword holds the account to POST /v1/auth/password
	// (and logout) until its password changes: set when its password is
	// known outside the appliance (SPEC 16.1).
	MustChangePassword bool `json:"mustChangePassword,omitempty"`
}

// CreateBootstrapAdmin stores the admin with an argon2id hash of password.
func CreateBootstrapAdmin(tx *store.Tx, email, password string, now time.Time) error {
	u := User{Email: strings.ToLower(email), PasswordHash: crypto.HashPassword(password), CreatedAt: now.UTC()}
	if err := bucketUsers.Put(tx, u.Email, u); err != nil {
		return err
	}
	return tx.Audit("iam.user.created", "init", u.Email, nil)
}

// dummyHash keeps a login for an unknown email as slow as a real one. It
// is made on first use: argon2id costs 64 MiB and a quarter second, which
// every stratum process (audit verify, backup, a restart) paid at start.
var dummyHash = sync.OnceValue(func() string { return crypto.HashPassword("stratum-dummy-password") })

// checkLogin verifies the credentials (read-only).
func checkLogin(tx *store.Tx, email, password string) (User, error) {
	fail := apierr.New(apierr.Unauthenticated, "wrong email or password")
	u, found, err := bucketUsers.Get(tx, strings.ToLower(email))
	if err != nil {
		return u, err
	}
	hash := u.PasswordHash
	if !found {
		hash = dummyHash()
	}
	ok, err := crypto.CheckPassword(password, hash)
	if err != nil || !ok || !found {
		return u, fail
	}
	return u, nil
}

// startSession issues a login token carrying the admin policy.
func startSession(tx *store.Tx, u User, now time.Time) (string, time.Time, error) {
	secret, t, err := issueToken(tx, Token{Name: "login", Kind: KindSession, Subject: u.Email, CreatedBy: "user:" + u.Email, Policy: AdminPolicy(), CreatedAt: now.UTC(), ExpiresAt: now.Add(SessionTTL).UTC()})
	if err != nil {
		return "", time.Time{}, err
	}
	return secret, t.ExpiresAt, tx.Audit("iam.login", "user:"+u.Email, t.ID, nil)
}

// purgeExpiredSessions deletes session tokens past their expiry.
func purgeExpiredSessions(tx *store.Tx, now time.Time) error {
	var dead []string
	err := bucketTokens.ForEach(tx, func(k string, t Token) error {
		if t.Kind == KindSession && now.After(t.ExpiresAt) {
			dead = append(dead, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range dead {
		if err := bucketTokens.Delete(tx, k); err != nil {
			return err
		}
	}
	return nil
}

// MarkMustChangeIfPassword marks email's account "must change password"
// when password (a secret known outside the appliance) opens it; it
// reports whether it did. Used once by the migration of SPEC 16.1.
func MarkMustChangeIfPassword(tx *store.Tx, email, password, why string) (bool, error) {
	u, found, err := bucketUsers.Get(tx, strings.ToLower(email))
	if err != nil || !found || password == "" {
		return false, err
	}
	ok, err := crypto.CheckPassword(password, u.PasswordHash)
	if err != nil || !ok {
		return false, nil
	}
	u.MustChangePassword = true
	if err := bucketUsers.Put(tx, u.Email, u); err != nil {
		return false, err
	}
	return true, tx.Audit("iam.user.must-change-password", "stratum", "user:"+u.Email, map[string]string{"why": why})
}
