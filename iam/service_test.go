package iam

import (
	"context"
	"errors"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/store"
)

func newTestService(t *testing.T, cfg Config) (*Service, string) {
	t.Helper()
	db := openStore(t)
	const email, password = "admin@stratum.local", "correct horse battery"
	if err := db.Update(func(tx *store.Tx) error { return CreateBootstrapAdmin(tx, email, password, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	cfg.DB = db
	return New(cfg), password
}

// TestServiceLogin: a wrong password is UNAUTHENTICATED and counts
// against the account; the right one starts a session whose token
// authenticates; once the account's limit is reached even the right
// password waits.
func TestServiceLogin(t *testing.T) {
	s, password := newTestService(t, Config{AccountLimiter: NewLoginLimiter(2, time.Minute)})
	ctx := context.Background()
	sess, err := s.Login(ctx, "Admin@stratum.local", password)
	token := sess.Token
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	p, err := s.Authenticate(token)
	if err != nil || p.User != "admin@stratum.local" {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	for range 2 {
		if _, err := s.Login(ctx, "admin@stratum.local", "wrong"); apierr.CodeOf(err) != apierr.Unauthenticated {
			t.Fatalf("wrong password: %v, want UNAUTHENTICATED", err)
		}
	}
	_, err = s.Login(ctx, "ADMIN@stratum.local", password)
	if e, ok := apierr.As(err); !ok || e.Code != apierr.TooManyRequests || e.RetryAfter < 1 {
		t.Fatalf("after the account's failures: %v, want TOO_MANY_REQUESTS with Retry-After", err)
	}
}

// TestServicePasswordChecksBounded: with every argon2id slot taken a
// login waits, and gives up with its context, starting no session.
func TestServicePasswordChecksBounded(t *testing.T) {
	s, password := newTestService(t, Config{PasswordChecks: 1})
	s.checks <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Login(ctx, "admin@stratum.local", password); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("login with no free slot: %v, want the context's deadline", err)
	}
	if list, err := s.ListSessions(); err != nil || len(list) != 0 {
		t.Fatalf("sessions after the refused login: %v, %v; want none", list, err)
	}
	<-s.checks
	if _, err := s.Login(context.Background(), "admin@stratum.local", password); err != nil {
		t.Fatalf("login once the slot is free: %v", err)
	}
}

// TestServiceChangePasswordWrongCurrent: a good session with a wrong
// current password is FORBIDDEN naming the field, and the password stays.
func TestServiceChangePasswordWrongCurrent(t *testing.T) {
	s, password := newTestService(t, Config{})
	sess, err := s.Login(context.Background(), "admin@stratum.local", password)
	token := sess.Token
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(token)
	if err != nil {
		t.Fatal(err)
	}
	err = s.ChangePassword(context.Background(), p, PasswordChange{CurrentPassword: "not it at all", NewPassword: "a brand new passphrase"})
	if e, ok := apierr.As(err); !ok || e.Code != apierr.Forbidden || len(e.Fields) != 1 || e.Fields[0].Field != "currentPassword" {
		t.Fatalf("wrong current password: %v, want FORBIDDEN on currentPassword", err)
	}
	if _, err := s.Login(context.Background(), "admin@stratum.local", password); err != nil {
		t.Fatalf("the old password no longer works: %v", err)
	}
}
