// Package openbao is the founder's side of the cluster's OpenBao (SPEC
// 19): the settings that name it, a small client of the HTTP endpoints
// stratum uses, the root-token rule, the converge that replaces a root
// token with a scoped one, and node tokens minted per control-plane node.
//
// The endpoints (auth/token/create, lookup-self, renew-self,
// lookup-accessor, revoke-accessor, sys/policies/acl) are the same on
// OpenBao and on HashiCorp Vault, from which OpenBao was forked: either
// server works. The client is plain net/http rather than an SDK: six
// JSON endpoints do not justify a module tree, and it keeps the static
// binary free of both servers' API modules.
package openbao

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"stratum/apierr"
)

// Settings name the cluster's OpenBao: the cluster file's openbao: block,
// overridden by serve's --openbao-* flags.
type Settings struct {
	// Addr is the server's base URL (https://HOST:8200). Plain http is
	// accepted for a loopback host only: a token never crosses a network
	// in the clear.
	Addr string `json:"addr,omitempty" yaml:"addr"`
	// CAFile is the PEM bundle that signs the server's certificate; the
	// host's roots when empty.
	CAFile string `json:"caFile,omitempty" yaml:"caFile"`
	// TokenFile holds the founder's own token (policy stratum-cp). A
	// token stored by `stratum openbao converge` takes its place.
	TokenFile string `json:"tokenFile,omitempty" yaml:"tokenFile"`
}

// Configured reports whether an OpenBao is named at all.
func (s Settings) Configured() bool { return s.Addr != "" }

// Merge returns s with every non-empty field of o in its place.
func (s Settings) Merge(o Settings) Settings {
	if o.Addr != "" {
		s.Addr = o.Addr
	}
	if o.CAFile != "" {
		s.CAFile = o.CAFile
	}
	if o.TokenFile != "" {
		s.TokenFile = o.TokenFile
	}
	return s
}

// Problems lists what is wrong with s, each under path.field.
func (s Settings) Problems(f *apierr.Fields, path string) {
	if s.Addr == "" {
		if s.CAFile != "" || s.TokenFile != "" {
			f.Add(path+".addr", "required when caFile or tokenFile is given")
		}
		return
	}
	u, err := url.Parse(s.Addr)
	switch {
	case err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
		f.Add(path+".addr", "must be a base URL: https://HOST[:PORT]")
	case u.Scheme == "http":
		if !loopback(u.Hostname()) {
			f.Add(path+".addr", "plain http only to a loopback address; use https")
		}
	case u.Scheme != "https":
		f.Add(path+".addr", "must be an https:// (or loopback http://) URL")
	}
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Client speaks OpenBao's HTTP API. Every call names the token it acts
// with: the founder's, or a root token during the converge.
type Client struct {
	base string
	http *http.Client
}

// requestTimeout bounds one call: a delivery waits on it.
const requestTimeout = 10 * time.Second

// NewClient checks s and reads its CA file.
func NewClient(s Settings) (*Client, error) {
	var f apierr.Fields
	s.Problems(&f, "openbao")
	if err := f.Err("the OpenBao settings have problems"); err != nil {
		return nil, err
	}
	if !s.Configured() {
		return nil, errors.New("no OpenBao is configured (openbao.addr)")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("OpenBao CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OpenBao CA file %s holds no PEM certificate", s.CAFile)
		}
		tc.RootCAs = pool
	}
	tr := &http.Transport{TLSClientConfig: tc, Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}
	return &Client{base: strings.TrimSuffix(s.Addr, "/"), http: &http.Client{Transport: tr, Timeout: requestTimeout}}, nil
}

// Error is the server's refusal: its status and its errors list.
type Error struct {
	Status int
	Path   string
	Errors []string
}

func (e *Error) Error() string {
	msg := strings.Join(e.Errors, "; ")
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("OpenBao %s answered %d: %s", e.Path, e.Status, msg)
}

// ErrUnreachable wraps every failure to get an answer at all.
var ErrUnreachable = errors.New("OpenBao is unreachable")

// maxAnswer bounds what is read of one answer.
const maxAnswer = 1 << 20

func (c *Client) do(ctx context.Context, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/v1/"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-Vault-Token", token)
	req.Header.Set("X-Vault-Request", "true")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The url.Error names the URL, never the token header.
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%w at %s: reading the answer: %v", ErrUnreachable, c.base, err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode, Path: path}
		var env struct {
			Errors []string `json:"errors"`
		}
		if json.Unmarshal(raw, &env) == nil {
			e.Errors = env.Errors
		}
		return e
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("OpenBao %s: the answer is not the JSON expected: %v", path, err)
	}
	return nil
}

// TokenInfo is what a lookup tells of a token (never the token itself).
type TokenInfo struct {
	Accessor    string            `json:"accessor"`
	Policies    []string          `json:"policies"`
	Meta        map[string]string `json:"meta"`
	Period      int64             `json:"period"` // seconds; 0 when not periodic
	Orphan      bool              `json:"orphan"`
	TTL         int64             `json:"ttl"`
	DisplayName string            `json:"display_name"`
}

// HasPolicy reports whether the token carries policy p.
func (i TokenInfo) HasPolicy(p string) bool {
	for _, q := range i.Policies {
		if q == p {
			return true
		}
	}
	return false
}

type lookupAnswer struct {
	Data TokenInfo `json:"data"`
}

// LookupSelf looks token up with itself (auth/token/lookup-self).
func (c *Client) LookupSelf(ctx context.Context, token string) (TokenInfo, error) {
	var a lookupAnswer
	err := c.do(ctx, token, http.MethodGet, "auth/token/lookup-self", nil, &a)
	return a.Data, err
}

// RenewSelf renews token's lease (a periodic token gets its period again).
func (c *Client) RenewSelf(ctx context.Context, token string) error {
	return c.do(ctx, token, http.MethodPost, "auth/token/renew-self", map[string]any{}, nil)
}

// LookupAccessor looks a token up by its accessor.
func (c *Client) LookupAccessor(ctx context.Context, token, accessor string) (TokenInfo, error) {
	var a lookupAnswer
	err := c.do(ctx, token, http.MethodPost, "auth/token/lookup-accessor", map[string]string{"accessor": accessor}, &a)
	return a.Data, err
}

// RevokeAccessor revokes the token behind accessor.
func (c *Client) RevokeAccessor(ctx context.Context, token, accessor string) error {
	return c.do(ctx, token, http.MethodPost, "auth/token/revoke-accessor", map[string]string{"accessor": accessor}, nil)
}

// TokenRequest is auth/token/create's body, the fields stratum uses.
type TokenRequest struct {
	Policies        []string          `json:"policies"`
	Period          string            `json:"period,omitempty"`
	NoParent        bool              `json:"no_parent,omitempty"`
	NoDefaultPolicy bool              `json:"no_default_policy,omitempty"`
	Meta            map[string]string `json:"meta,omitempty"`
	DisplayName     string            `json:"display_name,omitempty"`
}

// Token is a created token: the secret and its accessor.
type Token struct {
	Token    string
	Accessor string
	Policies []string
}

// CreateToken creates a token (auth/token/create) as token.
func (c *Client) CreateToken(ctx context.Context, token string, r TokenRequest) (Token, error) {
	var a struct {
		Auth struct {
			ClientToken string   `json:"client_token"`
			Accessor    string   `json:"accessor"`
			Policies    []string `json:"policies"`
		} `json:"auth"`
	}
	if err := c.do(ctx, token, http.MethodPost, "auth/token/create", r, &a); err != nil {
		return Token{}, err
	}
	if a.Auth.ClientToken == "" || a.Auth.Accessor == "" {
		return Token{}, errors.New("OpenBao auth/token/create answered without a token or accessor")
	}
	return Token{Token: a.Auth.ClientToken, Accessor: a.Auth.Accessor, Policies: a.Auth.Policies}, nil
}

// PutPolicy writes the ACL policy name (sys/policies/acl/NAME).
func (c *Client) PutPolicy(ctx context.Context, token, name, hcl string) error {
	return c.do(ctx, token, http.MethodPut, "sys/policies/acl/"+url.PathEscape(name), map[string]string{"policy": hcl}, nil)
}

// ReadPolicy answers the ACL policy name's text.
func (c *Client) ReadPolicy(ctx context.Context, token, name string) (string, error) {
	var a struct {
		Data struct {
			Policy string `json:"policy"`
		} `json:"data"`
	}
	err := c.do(ctx, token, http.MethodGet, "sys/policies/acl/"+url.PathEscape(name), nil, &a)
	return a.Data.Policy, err
}
