package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"stratum/apierr"
	"stratum/wire"
)

// Doer is the part of *http.Client the client uses.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Default size limits of the founder's answers: a view with its delivery,
// a members list of a large cluster stay far below DefaultMaxAnswer; an
// error envelope is a sentence or a list of field problems, which the
// founder caps at 1000 entries (about 100 KiB), below MaxError.
const (
	DefaultMaxAnswer = 16 << 20
	MaxError         = 1 << 20
)

// Options shape a Client. The zero value is one attempt per call, no
// token, the default size limit.
type Options struct {
	// Token is sent as a bearer token; empty sends none (a node speaks
	// with its mTLS leaf, which is the transport's).
	Token string
	// Retry, when set, retries a call that met a network error, a 5xx or a
	// 429 until its context ends. Unset, a call is one attempt (the
	// failover still moves the next call on).
	Retry *Backoff
	// Notify gets a line for each retry and failover (the joiner prints
	// them); nil is silent.
	Notify func(string)
	// MaxAnswer bounds a 2xx answer's body; 0 is DefaultMaxAnswer.
	MaxAnswer int64
	// Final reports a round-trip error that no retry can cure (the joiner's
	// CA pin mismatch); nil: every round-trip error is transient.
	Final func(error) bool
	// Encoding, when set, is sent as Accept-Encoding, and Decode opens an
	// answer the founder encoded with it (the CLI asks for zstd).
	Encoding string
	Decode   func(io.Reader) (io.ReadCloser, error)
}

// Client calls one founder, or the replicas of an HA founder: a call that
// meets a network error or a 5xx moves this call's retry, and the next
// call, to the next replica.
type Client struct {
	bases []string // https://HOST:PORT of each founder
	cur   atomic.Uint32
	hc    Doer
	opts  Options
}

// New is a client of the founders at bases (https://HOST:PORT each, at
// least one) over hc, whose transport holds the TLS configuration (the
// cluster CA, the node's leaf, a pin).
func New(bases []string, hc Doer, opts Options) *Client {
	if len(bases) == 0 {
		panic("apiclient: no founder")
	}
	if opts.MaxAnswer == 0 {
		opts.MaxAnswer = DefaultMaxAnswer
	}
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = strings.TrimRight(b, "/")
	}
	return &Client{bases: out, hc: hc, opts: opts}
}

// HTTPS is https://HOST:PORT of each HOST:PORT.
func HTTPS(hostports []string) []string {
	out := make([]string, len(hostports))
	for i, h := range hostports {
		out[i] = "https://" + h
	}
	return out
}

// Base is the founder calls go to now.
func (c *Client) Base() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// HTTP is the client's transport, for requests that are not JSON calls
// (release file downloads).
func (c *Client) HTTP() Doer { return c.hc }

// Token is the bearer token the client sends.
func (c *Client) Token() string { return c.opts.Token }

// Failover moves on from base after a transient failure there.
func (c *Client) Failover(base string) {
	if len(c.bases) < 2 || c.Base() != base {
		return
	}
	c.cur.Add(1)
	c.notify(fmt.Sprintf("%s failed; trying the founder at %s", strings.TrimPrefix(base, "https://"), strings.TrimPrefix(c.Base(), "https://")))
}

func (c *Client) notify(line string) {
	if c.opts.Notify != nil {
		c.opts.Notify(line)
	}
}

// RemoteError is a non-2xx answer, carrying the decoded error envelope
// (SPEC 2); apierr.As finds the envelope in it. Its text is the founder's
// message as sent, with its fields and details: that message already says
// what to do, so no client adds advice of its own to it.
type RemoteError struct {
	Status int
	Err    *apierr.Error
	// NotEnvelope: the answer was not the error envelope (a proxy's page,
	// a truncated body); Err then carries HTTP_<status> and a snippet.
	NotEnvelope bool
}

func (e *RemoteError) Error() string {
	msg := fmt.Sprintf("the founder answered %d %s: %s", e.Status, e.Err.Code, e.Err.Message)
	for _, f := range e.Err.Fields {
		if f.Field != "" {
			msg += fmt.Sprintf("; %s: %s", f.Field, f.Message)
		} else {
			msg += "; " + f.Message
		}
	}
	if len(e.Err.Details) > 0 {
		if b, err := json.Marshal(e.Err.Details); err == nil {
			msg += " " + string(b)
		}
	}
	return msg
}

func (e *RemoteError) Unwrap() error { return e.Err }

// TooLargeError is a 2xx answer over the size limit: no retry cures it.
type TooLargeError struct {
	What  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the founder's answer to %s is larger than %d bytes", e.What, e.Limit)
}

// Request is one JSON call.
type Request struct {
	// What names the call in retry lines and errors ("registering").
	What         string
	Method, Path string
	// Body is sent as JSON: a json.RawMessage or []byte as is, anything
	// else encoded; nil sends no body.
	Body any
	// Out receives a 2xx answer: a *json.RawMessage the bytes, anything
	// else decoded; nil discards it.
	Out any
	// Timeout bounds each attempt (a long-poll's hold plus slack); 0 means
	// none beyond the context.
	Timeout time.Duration
}

// Answer is one exchange's outcome as it came.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Exchange sends one request to the current founder and reads its answer
// whatever the status (bounded: MaxAnswer for a 2xx, MaxError otherwise).
// A network error or a 5xx moves the next call to the next founder.
func (c *Client) Exchange(ctx context.Context, method, path string, body any) (*Answer, error) {
	payload, err := encode(body)
	if err != nil {
		return nil, err
	}
	return c.exchange(ctx, method, path, payload)
}

func encode(body any) ([]byte, error) {
	switch b := body.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return b, nil
	case []byte:
		return b, nil
	}
	return json.Marshal(body)
}

func (c *Client) exchange(ctx context.Context, method, path string, payload []byte) (*Answer, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	base := c.Base()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.roundTrip(req, base)
}

// Send sends a request the caller built against Base() (a streamed
// upload), with the client's headers, and reads its answer as Exchange
// does.
func (c *Client) Send(req *http.Request) (*Answer, error) {
	return c.roundTrip(req, c.Base())
}

func (c *Client) roundTrip(req *http.Request, base string) (*Answer, error) {
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set(wire.ProtocolHeader, strconv.Itoa(wire.ProtocolVersion))
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if c.opts.Encoding != "" {
		req.Header.Set("Accept-Encoding", c.opts.Encoding)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if req.Context().Err() == nil && (c.opts.Final == nil || !c.opts.Final(err)) {
			c.Failover(base)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		c.Failover(base)
	}
	var answer io.Reader = resp.Body
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc == c.opts.Encoding && c.opts.Decode != nil {
		dr, err := c.opts.Decode(resp.Body)
		if err != nil {
			return nil, err
		}
		defer dr.Close()
		answer = dr
	}
	limit := c.opts.MaxAnswer
	if resp.StatusCode/100 != 2 {
		limit = MaxError
	}
	raw, err := io.ReadAll(io.LimitReader(answer, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		if resp.StatusCode/100 == 2 {
			return nil, &TooLargeError{What: req.Method + " " + req.URL.Path, Limit: limit}
		}
		raw = raw[:limit]
	}
	return &Answer{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

// Err is the error a non-2xx answer stands for: its envelope in a
// *RemoteError.
func (a *Answer) Err() *RemoteError { return remoteError(a.Status, a.Header, a.Body) }

func remoteError(status int, h http.Header, body []byte) *RemoteError {
	var env apierr.Error
	re := &RemoteError{Status: status, Err: &env}
	if err := json.Unmarshal(body, &env); err != nil || env.Code == "" {
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		env = apierr.Error{Code: apierr.Code(fmt.Sprintf("HTTP_%d", status)), Message: http.StatusText(status)}
		if snippet != "" {
			env.Message += ": " + snippet
		}
		re.NotEnvelope = true
	}
	env.RetryAfter = int(RetryAfter(h, time.Now()) / time.Second)
	return re
}

// failed is the error of a non-2xx answer: transient (after the founder's
// Retry-After) for a 5xx or a 429, final otherwise.
func failed(status int, h http.Header, body []byte) error {
	re := remoteError(status, h, body)
	if status >= 500 || status == http.StatusTooManyRequests {
		return &TransientError{Err: re, After: RetryAfter(h, time.Now())}
	}
	return re
}

// ResponseError is the error of a non-2xx answer read outside Call (a
// release file download): a *RemoteError, inside a *TransientError for a
// 5xx or a 429.
func ResponseError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxError))
	return failed(resp.StatusCode, resp.Header, body)
}

// Call sends r and decodes a 2xx answer into r.Out. Any other answer is a
// *RemoteError; with Options.Retry, network errors, 5xx and 429 are
// retried (after Retry-After when the founder sets one) until ctx ends.
// It returns the final status code.
func (c *Client) Call(ctx context.Context, r Request) (int, error) {
	payload, err := encode(r.Body)
	if err != nil {
		return 0, err
	}
	what := r.What
	if what == "" {
		what = r.Method + " " + r.Path
	}
	status := 0
	attempt := func(ctx context.Context) error {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if r.Timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, r.Timeout)
		}
		defer cancel()
		base := c.Base()
		a, err := c.exchange(actx, r.Method, r.Path, payload)
		if err != nil {
			var tl *TooLargeError
			switch {
			case errors.As(err, &tl), c.opts.Final != nil && c.opts.Final(err):
				return err
			case ctx.Err() != nil:
				return ctx.Err()
			}
			return c.next(&TransientError{Err: err}, base)
		}
		status = a.Status
		if a.Status/100 != 2 {
			err := failed(a.Status, a.Header, a.Body)
			if t, ok := err.(*TransientError); ok {
				return c.next(t, base)
			}
			return err
		}
		return decode(what, a.Body, r.Out)
	}
	if c.opts.Retry == nil {
		err = attempt(ctx)
		var t *TransientError
		if errors.As(err, &t) {
			err = t.Err
		}
		return status, err
	}
	return status, Retry(ctx, *c.opts.Retry, c.opts.Notify, what, attempt)
}

// next names in t the founder the retry goes to when the attempt at base
// failed over to another.
func (c *Client) next(t *TransientError, base string) *TransientError {
	if now := c.Base(); now != base {
		t.Next = strings.TrimPrefix(now, "https://")
	}
	return t
}

func decode(what string, raw []byte, out any) error {
	switch o := out.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*o = append((*o)[:0], raw...)
		return nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: the founder's answer is not the expected JSON: %v", what, err)
	}
	return nil
}
