package iam

import (
	"context"
	"errors"
	"strings"
	"time"

	"stratum/wire"

	"stratum/apierr"
	"stratum/crypto"
	"stratum/store"
)

// Config configures the IAM service.
type Config struct {
	DB  *store.DB
	Now func() time.Time // time.Now when nil
	// PasswordChecks bounds the argon2id verifications and hashes running
	// at once (64 MiB and tens of ms each); 2 when zero.
	PasswordChecks int
	// Limits bound login attempts per source, per (account, source) and
	// per account (zero fields take their defaults).
	Limits LoginLimits
	// PasswordChanged, when set, is told the email of each user whose
	// password changed, once the change is stored.
	PasswordChanged func(email string)
}

// Service is logins, authentication, API tokens and sessions over the
// store, built like the other domain services.
type Service struct {
	cfg Config
	// checks holds one slot per running argon2id check: the check runs
	// outside any write transaction and at most PasswordChecks at a time,
	// so a flood of logins neither holds the store's one writer nor
	// exhausts memory.
	checks chan struct{}
	// rows: the token and account rows Authenticate decoded.
	rows decodedRows
}

// New builds the service.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("iam: no store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PasswordChecks <= 0 {
		cfg.PasswordChecks = 2
	}
	cfg.Limits = cfg.Limits.withDefaults()
	return &Service{cfg: cfg, checks: make(chan struct{}, cfg.PasswordChecks)}, nil
}

// Authenticate resolves a bearer token to its principal.
func (s *Service) Authenticate(bearer string) (Principal, error) {
	var p Principal
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		p, err = authenticate(tx, bearer, s.cfg.Now(), &s.rows)
		return err
	})
	return p, err
}

// Login checks email's password, tried from source (LoginSource), and
// starts a session.
func (s *Service) Login(ctx context.Context, email, password, source string) (wire.LoginResponse, error) {
	var out wire.LoginResponse
	_, err := s.checkPassword(ctx, email, password, source, func(tx *store.Tx, u User) error {
		out.MustChangePassword = u.MustChangePassword
		var err error
		out.Token, out.ExpiresAt, err = startSession(tx, u, s.cfg.Now())
		return err
	})
	return out, err
}

// ChangePassword sets the caller's new password once its current one
// checks; the user's other sessions end.
func (s *Service) ChangePassword(ctx context.Context, p Principal, req wire.PasswordChange) error {
	if err := validatePasswordChange(req, p); err != nil {
		return err
	}
	u, err := s.checkPassword(ctx, p.User, req.CurrentPassword, "session:"+p.TokenID, nil)
	if apierr.CodeOf(err) == apierr.Unauthenticated {
		// The session is good; the password it sent is not.
		return apierr.WithFields(apierr.Forbidden, "the current password is wrong", []apierr.FieldError{{Field: "currentPassword", Message: "does not match"}})
	}
	if err != nil {
		return err
	}
	if err := s.acquire(ctx); err != nil {
		return err
	}
	hash := crypto.HashPassword(req.NewPassword)
	<-s.checks
	if err := s.cfg.DB.Update(func(tx *store.Tx) error { return setPassword(tx, p, u, hash, s.cfg.Now()) }); err != nil {
		return err
	}
	if s.cfg.PasswordChanged != nil {
		s.cfg.PasswordChanged(u.Email)
	}
	return nil
}

// checkPassword verifies email's password under the login limits: the
// attempt is counted before the check and given back when it passes, in
// the transaction that runs then (when not nil) with the user.
func (s *Service) checkPassword(ctx context.Context, email, password, source string, then func(*store.Tx, User) error) (User, error) {
	account := strings.ToLower(email)
	l := s.cfg.Limits
	var delay time.Duration
	err := s.cfg.DB.Update(func(tx *store.Tx) error {
		var err error
		delay, err = reserveLogin(tx, l, account, source, s.cfg.Now())
		return err
	})
	if err != nil {
		return User{}, err
	}
	u, verr := s.verify(ctx, email, password, delay)
	failed := apierr.CodeOf(verr) == apierr.Unauthenticated
	err = s.cfg.DB.Update(func(tx *store.Tx) error {
		if err := settleLogin(tx, l, account, source, failed, s.cfg.Now()); err != nil {
			return err
		}
		if verr != nil || then == nil {
			return nil
		}
		return then(tx, u)
	})
	if verr != nil {
		return User{}, verr
	}
	return u, err
}

// verify waits out the account's delay, then checks the password in a
// password check slot.
func (s *Service) verify(ctx context.Context, email, password string, delay time.Duration) (User, error) {
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return User{}, ctx.Err()
		}
	}
	if err := s.acquire(ctx); err != nil {
		return User{}, err
	}
	defer func() { <-s.checks }()
	var u User
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		u, err = checkLogin(tx, email, password)
		return err
	})
	return u, err
}

// acquire takes a password check slot, or gives up with ctx.
func (s *Service) acquire(ctx context.Context) error {
	select {
	case s.checks <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TooMany is the TOO_MANY_REQUESTS answer to wait out.
func TooMany(wait time.Duration, message string) error {
	e := apierr.New(apierr.TooManyRequests, "%s", message)
	e.RetryAfter = int(wait/time.Second) + 1
	return e
}

// CreateToken makes an API token for the caller: its secret, shown once,
// and its view.
func (s *Service) CreateToken(by Principal, req wire.CreateTokenRequest) (string, wire.TokenView, error) {
	var secret string
	var view wire.TokenView
	err := s.cfg.DB.Update(func(tx *store.Tx) error {
		var err error
		secret, view, err = createToken(tx, by, req, s.cfg.Now())
		return err
	})
	return secret, view, err
}

// ListTokens lists the API tokens (no secrets).
func (s *Service) ListTokens() ([]wire.TokenView, error) {
	var list []wire.TokenView
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		list, err = listTokens(tx)
		return err
	})
	return list, err
}

// RevokeToken revokes an API token and every token made under it.
func (s *Service) RevokeToken(by Principal, id string) error {
	return s.cfg.DB.Update(func(tx *store.Tx) error { return revokeToken(tx, by, id, s.cfg.Now()) })
}

// Logout ends the caller's login session.
func (s *Service) Logout(by Principal) error {
	return s.cfg.DB.Update(func(tx *store.Tx) error { return logout(tx, by, s.cfg.Now()) })
}

// ListSessions lists the live login sessions (no secrets).
func (s *Service) ListSessions() ([]wire.TokenView, error) {
	var list []wire.TokenView
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		list, err = listSessions(tx, s.cfg.Now())
		return err
	})
	return list, err
}

// RevokeSession ends a login session and every token made under it.
func (s *Service) RevokeSession(by Principal, id string) error {
	return s.cfg.DB.Update(func(tx *store.Tx) error { return revokeSession(tx, by, id, s.cfg.Now()) })
}

// PurgeExpiredSessions deletes the expired login sessions and login
// limit counters.
func (s *Service) PurgeExpiredSessions() error {
	return s.cfg.DB.Update(func(tx *store.Tx) error {
		if err := purgeLoginLimits(tx, s.cfg.Limits, s.cfg.Now()); err != nil {
			return err
		}
		return purgeExpiredSessions(tx, s.cfg.Now())
	})
}
