package iam

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/store"
	"stratum/wire"
)

func newTestService(t *testing.T, cfg Config) (*Service, string) {
	t.Helper()
	db := openStore(t)
	const email, password = "admin@stratum.local", "correct horse battery"
	if err := db.Update(func(tx *store.Tx) error { return CreateBootstrapAdmin(tx, email, password, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	cfg.DB = db
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, password
}

// TestServiceLogin: the right password starts a session whose token
// authenticates; a wrong one is UNAUTHENTICATED.
func TestServiceLogin(t *testing.T) {
	s, password := newTestService(t, Config{})
	ctx := context.Background()
	sess, err := s.Login(ctx, "Admin@stratum.local", password, "192.0.2.1")
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	p, err := s.Authenticate(sess.Token)
	if err != nil || p.User != "admin@stratum.local" || p.MustChangePassword {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	if _, err := s.Login(ctx, "admin@stratum.local", "wrong", "192.0.2.1"); apierr.CodeOf(err) != apierr.Unauthenticated {
		t.Fatalf("wrong password: %v, want UNAUTHENTICATED", err)
	}
}

// TestTrust16_5_LoginLimits: failures limit their source and their
// (account, source) pair; right passwords are given back (never
// limited); failures from many sources slow the account but never
// refuse a source that has not failed.
func TestTrust16_5_LoginLimits(t *testing.T) {
	ctx := context.Background()
	const admin = "admin@stratum.local"
	tooMany := func(err error) bool {
		e, ok := apierr.As(err)
		return ok && e.Code == apierr.TooManyRequests && e.RetryAfter >= 1
	}
	t.Run("source", func(t *testing.T) {
		s, password := newTestService(t, Config{Limits: LoginLimits{SourceBurst: 3, PairBurst: 100}})
		for i := range 3 {
			if _, err := s.Login(ctx, fmt.Sprintf("u%d@x", i), "wrong", "192.0.2.1"); apierr.CodeOf(err) != apierr.Unauthenticated {
				t.Fatalf("failure %d: %v", i, err)
			}
		}
		if _, err := s.Login(ctx, admin, password, "192.0.2.1"); !tooMany(err) {
			t.Fatalf("right password from a source at its limit: %v, want 429", err)
		}
		if _, err := s.Login(ctx, admin, password, "192.0.2.2"); err != nil {
			t.Fatalf("another source: %v", err)
		}
	})
	t.Run("pair", func(t *testing.T) {
		s, password := newTestService(t, Config{Limits: LoginLimits{SourceBurst: 100, PairBurst: 2}})
		for range 2 {
			_, _ = s.Login(ctx, admin, "wrong", "192.0.2.1")
		}
		if _, err := s.Login(ctx, admin, password, "192.0.2.1"); !tooMany(err) {
			t.Fatalf("the pair at its limit: %v, want 429", err)
		}
		if _, err := s.Login(ctx, "other@x", "wrong", "192.0.2.1"); apierr.CodeOf(err) != apierr.Unauthenticated {
			t.Fatalf("another account from that source: %v", err)
		}
	})
	t.Run("successes are given back", func(t *testing.T) {
		s, password := newTestService(t, Config{Limits: LoginLimits{SourceBurst: 2, PairBurst: 2}})
		for i := range 6 {
			if _, err := s.Login(ctx, admin, password, "192.0.2.1"); err != nil {
				t.Fatalf("right login %d: %v", i, err)
			}
		}
	})
	t.Run("a flood slows the account, never refuses it", func(t *testing.T) {
		s, password := newTestService(t, Config{Limits: LoginLimits{AccountFailures: 3, AccountStep: 40 * time.Millisecond, MaxDelay: 100 * time.Millisecond}})
		for i := range 12 {
			_, _ = s.Login(ctx, admin, "wrong", fmt.Sprintf("192.0.2.%d", 10+i))
		}
		start := time.Now()
		if _, err := s.Login(ctx, admin, password, "198.51.100.1"); err != nil {
			t.Fatalf("right password from a source that has not failed: %v", err)
		}
		if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
			t.Errorf("the flooded account answered after %v, want the bounded delay (100ms)", d)
		}
	})
	t.Run("IPv6 counts per /64", func(t *testing.T) {
		if a, b := LoginSource("2001:db8:1:2::1"), LoginSource("2001:db8:1:2:ffff::9"); a != b || a != "2001:db8:1:2::/64" {
			t.Fatalf("sources %q %q", a, b)
		}
		if got := LoginSource("127.0.0.3"); got != "127.0.0.3" {
			t.Fatalf("IPv4 source %q", got)
		}
	})
}

// TestServicePasswordChecksBounded: with every argon2id slot taken a
// login waits, and gives up with its context, starting no session.
func TestServicePasswordChecksBounded(t *testing.T) {
	s, password := newTestService(t, Config{PasswordChecks: 1})
	s.checks <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Login(ctx, "admin@stratum.local", password, "192.0.2.1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("login with no free slot: %v, want the context's deadline", err)
	}
	if list, err := s.ListSessions(); err != nil || len(list) != 0 {
		t.Fatalf("sessions after the refused login: %v, %v; want none", list, err)
	}
	<-s.checks
	if _, err := s.Login(context.Background(), "admin@stratum.local", password, "192.0.2.1"); err != nil {
		t.Fatalf("login once the slot is free: %v", err)
	}
}

// TestServiceChangePasswordWrongCurrent: a good session with a wrong
// current password is FORBIDDEN naming the field, and the password stays.
func TestServiceChangePasswordWrongCurrent(t *testing.T) {
	s, password := newTestService(t, Config{})
	sess, err := s.Login(context.Background(), "admin@stratum.local", password, "192.0.2.1")
	token := sess.Token
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(token)
	if err != nil {
		t.Fatal(err)
	}
	err = s.ChangePassword(context.Background(), p, wire.PasswordChange{CurrentPassword: "not it at all", NewPassword: "a brand new passphrase"})
	if e, ok := apierr.As(err); !ok || e.Code != apierr.Forbidden || len(e.Fields) != 1 || e.Fields[0].Field != "currentPassword" {
		t.Fatalf("wrong current password: %v, want FORBIDDEN on currentPassword", err)
	}
	if _, err := s.Login(context.Background(), "admin@stratum.local", password, "192.0.2.1"); err != nil {
		t.Fatalf("the old password no longer works: %v", err)
	}
}
