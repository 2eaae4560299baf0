package openbao

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"stratum/apierr"
)

// The two policies stratum writes, and the periods of its tokens. Both
// tokens are periodic: they live as long as someone renews them within
// the period, and no longer.
const (
	PolicyControlPlane = "stratum-cp"
	PolicyNode         = "stratum-node"
	// FounderPeriod is the founder's own token's period; the founder
	// renews it far more often (RenewEvery).
	FounderPeriod = "72h"
	// NodePeriod is a node token's period; the node renews it.
	NodePeriod = "24h"
)

// policyControlPlane lets the founder mint and revoke node tokens: sudo
// on auth/token/create is what periodic and orphan tokens need. It cannot
// make a root token (OpenBao requires a root parent for that).
const policyControlPlane = `# stratum-cp: the stratum founder's own token (written by stratum openbao converge)
path "auth/token/create" {
  capabilities = ["create", "update", "sudo"]
}
path "auth/token/lookup-accessor" {
  capabilities = ["update"]
}
path "auth/token/revoke-accessor" {
  capabilities = ["update"]
}
path "auth/token/lookup-self" {
  capabilities = ["read"]
}
path "auth/token/renew-self" {
  capabilities = ["update"]
}
`

// policyNode is a node's own token: it can keep itself alive and no more;
// the services a node runs get their grants added to this policy.
const policyNode = `# stratum-node: one node's token, minted by the founder at its join
path "auth/token/lookup-self" {
  capabilities = ["read"]
}
path "auth/token/renew-self" {
  capabilities = ["update"]
}
`

// ConvergeHint is what an operator runs to leave a root token behind.
const ConvergeHint = "run `stratum openbao converge --root-token-file FILE` on the founder"

// CheckFounderToken is the root-token rule: a founder acting with a root
// token, or with one that lacks stratum-cp, delivers no bundle.
func CheckFounderToken(i TokenInfo) error {
	if i.HasPolicy("root") {
		return apierr.New(apierr.OpenBaoRootToken, "the founder's OpenBao token has the root policy, and no node receives a root token: %s", ConvergeHint)
	}
	if !i.HasPolicy(PolicyControlPlane) {
		return apierr.New(apierr.OpenBaoRootToken, "the founder's OpenBao token lacks the %s policy (it has [%s]): %s", PolicyControlPlane, strings.Join(i.Policies, " "), ConvergeHint)
	}
	return nil
}

// Config is the founder's OpenBao: its settings and where the founder's
// token comes from (the store after a converge, else the token file).
type Config struct {
	Settings Settings
	// Token answers the founder's current token.
	Token func() (string, error)
}

// Service is the founder's side of the cluster's OpenBao: its client and
// its token.
type Service struct {
	Client *Client
	token  func() (string, error)
}

// New builds the service over an OpenBao at cfg.Settings.
func New(cfg Config) (*Service, error) {
	if cfg.Token == nil {
		return nil, errors.New("openbao: no token source")
	}
	c, err := NewClient(cfg.Settings)
	if err != nil {
		return nil, err
	}
	return &Service{Client: c, token: cfg.Token}, nil
}

// unavailable turns a failed call into the reason a delivery waits on.
func unavailable(what string, err error) error {
	var e *Error
	if errors.As(err, &e) && (e.Status == http.StatusForbidden || e.Status == http.StatusUnauthorized) {
		return apierr.New(apierr.Unavailable, "OpenBao refused the founder's token on %s (%s): it expired or belongs to another OpenBao; %s", what, strings.Join(e.Errors, "; "), ConvergeHint)
	}
	return apierr.New(apierr.Unavailable, "OpenBao %s failed, the delivery waits: %v", what, err)
}

// FounderToken looks the founder's token up (auth/token/lookup-self) and
// applies the root-token rule; it answers the token when a bundle may
// carry it, else why not.
func (f *Service) FounderToken(ctx context.Context) (string, error) {
	tok, err := f.token()
	if err != nil {
		return "", apierr.New(apierr.Unavailable, "the founder has no OpenBao token (%v): give openbao.tokenFile, or %s", err, ConvergeHint)
	}
	if tok == "" {
		return "", apierr.New(apierr.Unavailable, "the founder has no OpenBao token: give openbao.tokenFile, or %s", ConvergeHint)
	}
	info, err := f.Client.LookupSelf(ctx, tok)
	if err != nil {
		return "", unavailable("lookup-self", err)
	}
	if err := CheckFounderToken(info); err != nil {
		return "", err
	}
	return tok, nil
}

// Renew renews the founder's token so it outlives its period.
func (f *Service) Renew(ctx context.Context) error {
	tok, err := f.FounderToken(ctx)
	if err != nil {
		return err
	}
	if err := f.Client.RenewSelf(ctx, tok); err != nil {
		return unavailable("renew-self", err)
	}
	return nil
}

// MintNodeToken creates nodeID's token: periodic, orphan (it outlives the
// founder's token), policy stratum-node, metadata nodeId.
func (f *Service) MintNodeToken(ctx context.Context, founderToken, nodeID string) (Token, error) {
	t, err := f.Client.CreateToken(ctx, founderToken, TokenRequest{
		Policies: []string{PolicyNode}, Period: NodePeriod, NoParent: true,
		Meta: map[string]string{"nodeId": nodeID}, DisplayName: "stratum-node-" + nodeID,
	})
	if err != nil {
		return Token{}, unavailable("auth/token/create", err)
	}
	return t, nil
}

// Revoke revokes the token behind accessor. A token already gone (OpenBao
// answers 400 for an accessor it does not know) counts as revoked.
func (f *Service) Revoke(ctx context.Context, accessor string) error {
	tok, err := f.token()
	if err != nil {
		return err
	}
	err = f.Client.RevokeAccessor(ctx, tok, accessor)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusBadRequest {
		if _, lerr := f.Client.LookupAccessor(ctx, tok, accessor); errors.As(lerr, &e) && e.Status == http.StatusBadRequest {
			return nil
		}
	}
	if err != nil {
		return unavailable("revoke-accessor", err)
	}
	return nil
}

// Converge writes the policies stratum-cp and stratum-node with
// rootToken and creates the founder's periodic, orphan stratum-cp token.
// The caller stores the answer and forgets rootToken.
func Converge(ctx context.Context, c *Client, rootToken string) (Token, error) {
	if _, err := c.LookupSelf(ctx, rootToken); err != nil {
		return Token{}, fmt.Errorf("the root token: %w", err)
	}
	for name, hcl := range map[string]string{PolicyControlPlane: policyControlPlane, PolicyNode: policyNode} {
		if err := c.PutPolicy(ctx, rootToken, name, hcl); err != nil {
			return Token{}, fmt.Errorf("write policy %s: %w", name, err)
		}
	}
	t, err := c.CreateToken(ctx, rootToken, TokenRequest{
		Policies: []string{PolicyControlPlane}, Period: FounderPeriod, NoParent: true,
		NoDefaultPolicy: true, DisplayName: "stratum-founder",
	})
	if err != nil {
		return Token{}, fmt.Errorf("create the founder's %s token: %w", PolicyControlPlane, err)
	}
	info, err := c.LookupSelf(ctx, t.Token)
	if err != nil {
		return Token{}, fmt.Errorf("look the new token up: %w", err)
	}
	if err := CheckFounderToken(info); err != nil {
		return Token{}, err
	}
	return t, nil
}
