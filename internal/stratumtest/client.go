package stratumtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"stratum/apiclient"
	"stratum/wire"

	"stratum/apierr"
)

// Client calls one listener of a founder, with a bearer token or none.
type Client struct {
	HTTP  *http.Client
	Base  string // https://host:port
	Token string
}

// AdminClient is a client of the admin API without a token.
func (f *Founder) AdminClient() *Client {
	return &Client{HTTP: f.Client, Base: "https://" + f.API}
}

// Admin logs the bootstrap admin in and returns its client.
func (f *Founder) Admin(t testing.TB) *Client {
	t.Helper()
	email, password := f.Credentials(t)
	return f.Login(t, email, password)
}

// As is a copy of c that sends token instead of its own (none when
// empty): another caller of the same listener.
func (c *Client) As(token string) *Client {
	d := *c
	d.Token = token
	return &d
}

// Login logs in and returns the session token.
func (c *Client) Login(t testing.TB, email, password string) string {
	t.Helper()
	var out wire.LoginResponse
	c.Must(t, "POST", "/v1/auth/login", wire.LoginRequest{Email: email, Password: password}, 200, &out)
	if out.Token == "" {
		t.Fatal("login answered no token")
	}
	return out.Token
}

// api is the one founder client (package apiclient) over c's fields.
func (c *Client) api() *apiclient.Client {
	return apiclient.New([]string{c.Base}, c.HTTP, apiclient.Options{Token: c.Token, MaxAnswer: maxAnswer})
}

// maxAnswer bounds an answer in tests: far above any real one (a release
// set of 100k nodes), still a bound.
const maxAnswer = 1 << 30

// Do sends body (JSON-encoded; a json.RawMessage is sent as is) and
// returns the status. A 2xx answer is decoded into out; any other is
// returned as its *apierr.Error envelope (an answer that is not the
// envelope is an error too).
func (c *Client) Do(method, path string, body, out any) (int, *apierr.Error, error) {
	return c.DoContext(context.Background(), method, path, body, out)
}

// DoContext is Do under ctx: a long-poll a harness ends when it stops.
func (c *Client) DoContext(ctx context.Context, method, path string, body, out any) (int, *apierr.Error, error) {
	a, err := c.api().Exchange(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	if a.Status >= 300 {
		re := a.Err()
		if re.NotEnvelope {
			return a.Status, nil, fmt.Errorf("%s %s: %d answer is not the error envelope: %s", method, path, a.Status, a.Body)
		}
		return a.Status, re.Err, nil
	}
	if out != nil && len(a.Body) > 0 {
		if err := json.Unmarshal(a.Body, out); err != nil {
			return a.Status, nil, fmt.Errorf("%s %s: decode %s: %v", method, path, a.Body, err)
		}
	}
	return a.Status, nil, nil
}

// Raw sends body (JSON-encoded) and returns the status and the raw answer.
func (c *Client) Raw(method, path string, body any) (int, []byte, error) {
	a, err := c.api().Exchange(context.Background(), method, path, body)
	if err != nil {
		return 0, nil, err
	}
	return a.Status, a.Body, nil
}

// Must is Do that fails the test unless the status is want; it returns
// the error envelope of a non-2xx answer.
func (c *Client) Must(t testing.TB, method, path string, body any, want int, out any) *apierr.Error {
	t.Helper()
	status, e, err := c.Do(method, path, body, out)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %+v", method, path, status, want, e)
	}
	return e
}
