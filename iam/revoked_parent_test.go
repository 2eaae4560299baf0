package iam

import (
	"context"
	"testing"

	"stratum/apierr"
	"stratum/wire"
)

// The principal is authenticated in its own read transaction (admit), the
// handler then reads the body and creates the token in a later write
// transaction that never re-checks the caller. A parent revoked in between
// leaves a live child that no cascade will reach.
func TestTrust01_RevokedWhileCreatingLeavesNoChild(t *testing.T) {
	s, password := newTestService(t, Config{})
	login, err := s.Login(context.Background(), "admin@stratum.local", password, "192.0.2.1")
	sess := login.Token
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := s.Authenticate(sess)
	pol := []byte(`{"version":"2026-01-01","statement":[{"effect":"allow","action":["*"],"resource":["*"]}]}`)
	parentSecret, parent, err := s.CreateToken(admin, wire.CreateTokenRequest{Name: "p", Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	stale, err := s.Authenticate(parentSecret) // admit
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(admin, parent.ID); err != nil { // operator revokes while the body is still arriving
		t.Fatal(err)
	}
	childSecret, _, err := s.CreateToken(stale, wire.CreateTokenRequest{Name: "c", Policy: pol})
	if err != nil {
		if e, ok := apierr.As(err); !ok || e.Code != apierr.Unauthenticated {
			t.Fatalf("a stale caller: %v, want UNAUTHENTICATED", err)
		}
		return
	}
	if _, err := s.Authenticate(childSecret); err == nil {
		t.Fatalf("a token revoked before the create committed minted a live child")
	}
}
