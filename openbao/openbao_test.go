package openbao_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/internal/baotest"
	"stratum/openbao"
)

func TestOpenBaoRootTokenRule(t *testing.T) {
	for _, tt := range []struct {
		name     string
		policies []string
		refused  bool
	}{
		{"root", []string{"root"}, true},
		{"root beside stratum-cp", []string{"root", "stratum-cp"}, true},
		{"no stratum-cp", []string{"default", "admin"}, true},
		{"none", nil, true},
		{"scoped", []string{"stratum-cp"}, false},
		{"scoped with default", []string{"default", "stratum-cp"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := openbao.CheckFounderToken(openbao.TokenInfo{Policies: tt.policies})
			if got := apierr.CodeOf(err) == apierr.OpenBaoRootToken; got != tt.refused {
				t.Fatalf("policies %v: refused=%v (%v), want %v", tt.policies, got, err, tt.refused)
			}
		})
	}
}

func TestOpenBaoSettingsMerge(t *testing.T) {
	file := openbao.Settings{Addr: "https://a:8200", CAFile: "/ca", TokenFile: "/t"}
	got := file.Merge(openbao.Settings{Addr: "https://b:8200"})
	if got != (openbao.Settings{Addr: "https://b:8200", CAFile: "/ca", TokenFile: "/t"}) {
		t.Fatalf("merge: %+v", got)
	}
}

// TestOpenBaoAgainstServer runs the founder's side against a real server
// of OpenBao's API: the converge writes both policies and a periodic
// stratum-cp token that passes the root-token rule (the root token does
// not), a node token is periodic, orphan, stratum-node with its node id
// in metadata, and revoking it by accessor makes it useless.
func TestOpenBaoAgainstServer(t *testing.T) {
	srv := baotest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := openbao.NewClient(openbao.Settings{Addr: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	root, err := openbao.New(openbao.Config{Settings: openbao.Settings{Addr: srv.Addr}, Token: func() (string, error) { return srv.RootToken, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.FounderToken(ctx); apierr.CodeOf(err) != apierr.OpenBaoRootToken {
		t.Fatalf("a root token passes the rule: %v", err)
	}
	tok, err := openbao.Converge(ctx, c, srv.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{openbao.PolicyControlPlane, openbao.PolicyNode} {
		if txt, err := c.ReadPolicy(ctx, srv.RootToken, p); err != nil || txt == "" {
			t.Errorf("policy %s: %q %v", p, txt, err)
		}
	}
	info, err := c.LookupSelf(ctx, tok.Token)
	if err != nil || info.HasPolicy("root") || !info.HasPolicy(openbao.PolicyControlPlane) || info.Period == 0 || !info.Orphan {
		t.Fatalf("the converged token: %+v %v", info, err)
	}
	f, err := openbao.New(openbao.Config{Settings: openbao.Settings{Addr: srv.Addr}, Token: func() (string, error) { return tok.Token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ft, err := f.FounderToken(ctx)
	if err != nil || ft != tok.Token {
		t.Fatalf("the converged token is refused: %v", err)
	}
	if err := f.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	node, err := f.MintNodeToken(ctx, ft, "n-abc12def")
	if err != nil {
		t.Fatal(err)
	}
	ni, err := c.LookupSelf(ctx, node.Token)
	if err != nil || !ni.HasPolicy(openbao.PolicyNode) || ni.HasPolicy(openbao.PolicyControlPlane) || ni.Meta["nodeId"] != "n-abc12def" || ni.Period != 24*3600 || !ni.Orphan {
		t.Fatalf("the node token: %+v %v", ni, err)
	}
	if ni.Accessor != node.Accessor {
		t.Fatalf("accessor %s, lookup says %s", node.Accessor, ni.Accessor)
	}
	// The scoped token cannot make a root token, though it has sudo on create.
	if _, err := c.CreateToken(ctx, ft, openbao.TokenRequest{Policies: []string{"root"}}); err == nil {
		t.Fatal("a stratum-cp token created a root token")
	}
	if err := f.Revoke(ctx, node.Accessor); err != nil {
		t.Fatal(err)
	}
	var e *openbao.Error
	if _, err := c.LookupSelf(ctx, node.Token); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Fatalf("a revoked node token still looks itself up: %v", err)
	}
	// Revoking again (a retry after a lost answer) is not an error.
	if err := f.Revoke(ctx, node.Accessor); err != nil {
		t.Fatalf("revoking twice: %v", err)
	}
	// An unreachable server is a reason to wait, naming no token.
	srv.Stop()
	time.Sleep(100 * time.Millisecond)
	if _, err := f.FounderToken(ctx); apierr.CodeOf(err) != apierr.Unavailable {
		t.Fatalf("server gone: %v", err)
	} else if containsAny(err.Error(), tok.Token, srv.RootToken) {
		t.Fatalf("the error names a token: %v", err)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}
