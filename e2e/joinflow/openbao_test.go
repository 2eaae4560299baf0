package joinflow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/baotest"
	"stratum/internal/stratumtest"
	"stratum/openbao"
)

// TestOpenBao_RootTokenRefusedUntilConvergeThenNodeToken: a founder whose
// OpenBao token is a root token delivers nothing to a control-plane
// joiner (it stays approved, both views say OPENBAO_ROOT_TOKEN); after
// `stratum openbao converge` the real joiner receives the founder's
// stratum-cp token and a node token the server reports with policy
// stratum-node and the node's id in its metadata, written 0600 under
// --root. A second control-plane join, cancelled, has its node token
// revoked on the server, and so has the first once its member is removed.
func TestOpenBao_RootTokenRefusedUntilConvergeThenNodeToken(t *testing.T) {
	bao := baotest.Start(t)
	work := t.TempDir()
	rootFile := bao.WriteRootToken(t, work)
	f := stratumtest.Serve(t, filepath.Join(work, "founder"), "--dev", "--probe-startupz=false",
		"--openbao-addr", bao.Addr, "--openbao-token-file", rootFile)
	// The banner's last lines follow the ones the harness waits for.
	waitFor(t, 10*time.Second, "the founder saying at start that its OpenBao token is a root token", func() bool {
		return strings.Contains(f.Stdout(), "OpenBao:") && strings.Contains(f.Stdout(), "OPENBAO_ROOT_TOKEN")
	})
	j := startJoin(t, f, work, "cp-a", "127.0.0.2", "control-plane")
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+j.joinID+"/approve", map[string]any{}, 200, nil)
	var op struct{ State, Reason string }
	waitFor(t, 20*time.Second, "the approved join shows OPENBAO_ROOT_TOKEN", func() bool {
		f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations/"+j.joinID, nil, 200, &op)
		return strings.HasPrefix(op.Reason, "OPENBAO_ROOT_TOKEN")
	})
	if op.State != "approved" || !strings.Contains(op.Reason, "stratum openbao converge") {
		t.Fatalf("operator view: %+v", op)
	}
	// It stays so: nothing is delivered while the founder holds a root token.
	time.Sleep(2 * time.Second)
	f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations/"+j.joinID, nil, 200, &op)
	if op.State != "approved" {
		t.Fatalf("delivered with a root token: %+v", op)
	}
	if _, err := os.Stat(filepath.Join(j.root, "etc/stratum/node.yaml")); err == nil {
		t.Fatal("the joiner wrote a delivery while the founder held a root token")
	}

	out := mustRun(t, "openbao", "converge", "--data", f.Dir, "--root-token-file", rootFile)
	if !strings.Contains(out, "converged") || strings.Contains(out+f.Output(), bao.RootToken) {
		t.Fatalf("converge: %s", out)
	}
	root := j.wait(t, f, 60*time.Second)
	nodeID := stratumtest.NodeID(t, root)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := openbao.NewClient(openbao.Settings{Addr: bao.Addr})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(name string) string {
		p := filepath.Join(root, "etc/stratum/secrets", name)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", name, fi.Mode().Perm())
		}
		b, _ := os.ReadFile(p)
		return string(b)
	}
	nodeTok := secret("openbao-node.token")
	ni, err := c.LookupSelf(ctx, nodeTok)
	if err != nil || !ni.HasPolicy(openbao.PolicyNode) || ni.HasPolicy("root") || ni.Meta["nodeId"] != nodeID || ni.Period == 0 || !ni.Orphan {
		t.Fatalf("the node token as the server sees it: %+v %v (node %s)", ni, err, nodeID)
	}
	fi, err := c.LookupSelf(ctx, secret("openbao-token"))
	if err != nil || fi.HasPolicy("root") || !fi.HasPolicy(openbao.PolicyControlPlane) {
		t.Fatalf("the delivered founder token: %+v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/stratum/bundle.json")); strings.Contains(string(b), nodeTok) {
		t.Fatal("bundle.json carries the node token")
	}
	t.Logf("node %s: token policies %v, meta %v, period %ds, orphan %v", nodeID, ni.Policies, ni.Meta, ni.Period, ni.Orphan)

	// A second control-plane join, delivered then cancelled: its token dies.
	m, reg := register(t, f, roleToken(t, f, "control-plane"), "0.1.0", "127.0.0.3")
	reg.want(t, 201, "")
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+m.joinID+"/approve", map[string]any{}, 200, nil)
	var v struct {
		State    string
		Delivery struct {
			Bundle struct{ OpenBaoNodeToken string }
		}
	}
	waitFor(t, 20*time.Second, "the second join delivered", func() bool {
		a := send(t, m.joiner, "GET", "https://"+f.Join+"/v1/join/registrations/"+m.joinID, "", nil).want(t, 200, "")
		_ = json.Unmarshal(a.raw, &v)
		return v.State == "delivering"
	})
	second := v.Delivery.Bundle.OpenBaoNodeToken
	if _, err := c.LookupSelf(ctx, second); err != nil || second == "" {
		t.Fatalf("the second node token is not live: %v", err)
	}
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+m.joinID+"/cancel", map[string]any{"reason": "wrong rack"}, 200, nil)
	waitFor(t, 20*time.Second, "the cancelled join's node token revoked", func() bool {
		_, err := c.LookupSelf(ctx, second)
		var e *openbao.Error
		return errors.As(err, &e) && e.Status == http.StatusForbidden
	})
	if _, err := c.LookupSelf(ctx, nodeTok); err != nil {
		t.Fatalf("the joined node's token was revoked with the cancelled one: %v", err)
	}
	// The joined node's machine is gone: removed, its token dies too.
	f.Operator(t).Must(t, "POST", "/v1/admin/cluster/members/"+nodeID+"/remove", map[string]any{"reason": "chassis returned"}, 200, nil)
	waitFor(t, 20*time.Second, "the removed member's node token revoked", func() bool {
		_, err := c.LookupSelf(ctx, nodeTok)
		var e *openbao.Error
		return errors.As(err, &e) && e.Status == http.StatusForbidden
	})
	// The revocation is audited once OpenBao confirmed it.
	waitFor(t, 10*time.Second, "the converge and the revocation audited", func() bool {
		kinds := strings.Join(auditKinds(t, f), " ")
		return strings.Contains(kinds, "openbao.converged") && strings.Contains(kinds, "openbao.node-token.revoked")
	})
}

// TestOpenBao_NoneConfiguredDeliversNeitherToken: a founder without an
// OpenBao says so at start and delivers a control-plane node neither
// openBaoToken nor openBaoNodeToken: nothing is made up.
func TestOpenBao_NoneConfiguredDeliversNeitherToken(t *testing.T) {
	work := t.TempDir()
	f := stratumtest.Serve(t, filepath.Join(work, "founder"), "--dev", "--probe-startupz=false")
	if !strings.Contains(f.Output(), "no OpenBao is configured") {
		t.Errorf("the founder does not say it has no OpenBao:\n%s", f.Output())
	}
	m, reg := register(t, f, roleToken(t, f, "control-plane"), "0.1.0", "127.0.0.2")
	reg.want(t, 201, "")
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+m.joinID+"/approve", map[string]any{}, 200, nil)
	var v struct {
		State    string
		Delivery struct{ Bundle map[string]json.RawMessage }
	}
	a := send(t, m.joiner, "GET", "https://"+f.Join+"/v1/join/registrations/"+m.joinID, "", nil).want(t, 200, "")
	if err := json.Unmarshal(a.raw, &v); err != nil || v.State != "delivering" || v.Delivery.Bundle["nodeCert"] == nil {
		t.Fatalf("no delivery: %s", a.raw)
	}
	for _, k := range []string{"openBaoToken", "openBaoNodeToken"} {
		if raw, ok := v.Delivery.Bundle[k]; ok {
			t.Errorf("the bundle carries %s = %s with no OpenBao configured", k, raw)
		}
	}
	if strings.Contains(string(a.raw), "hvs.") {
		t.Error("the delivery carries an hvs. token")
	}
}

// roleToken makes a single-use join token of role.
func roleToken(t *testing.T, f *stratumtest.Founder, role string) string {
	t.Helper()
	var tok struct{ Token string }
	f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": role, "uses": 1}, 201, &tok)
	return tok.Token
}
