package stratumtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

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
	c := f.AdminClient()
	c.Token = c.Login(t, email, password)
	return c
}

// Login logs in and returns the session token.
func (c *Client) Login(t testing.TB, email, password string) string {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	c.Must(t, "POST", "/v1/auth/login", map[string]string{"email": email, "password": password}, 200, &out)
	if out.Token == "" {
		t.Fatal("login answered no token")
	}
	return out.Token
}

// Do sends body (JSON-encoded; a json.RawMessage is sent as is) and
// returns the status. A 2xx answer is decoded into out; any other is
// returned as its *apierr.Error envelope (an answer that is not the
// envelope is an error too).
func (c *Client) Do(method, path string, body, out any) (int, *apierr.Error, error) {
	status, raw, err := c.Raw(method, path, body)
	if err != nil {
		return status, nil, err
	}
	if status >= 300 {
		var e apierr.Error
		if err := json.Unmarshal(raw, &e); err != nil || e.Code == "" {
			return status, nil, fmt.Errorf("%s %s: %d answer is not the error envelope: %s", method, path, status, raw)
		}
		return status, &e, nil
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return status, nil, fmt.Errorf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return status, nil, nil
}

// Raw sends body (JSON-encoded) and returns the status and the raw answer.
func (c *Client) Raw(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
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
