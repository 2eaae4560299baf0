package joiner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"stratum/apierr"
)

// httpDoer is the part of *http.Client the joiner uses.
type httpDoer interface {
	Do(*http.Request) (*http.Response, error)
}

// Size limits for what the founder sends: a view carries the delivery
// (node.yaml, PEMs, a node list), far below maxViewSize; an error envelope
// is a sentence or a few field entries.
const (
	maxViewSize  = 8 << 20
	maxErrorSize = 64 << 10
)

// apiClient talks JSON to the join listener, retrying what can pass:
// network errors, 5xx (503 RELEASE_BUSY, UNAVAILABLE while the founder
// restarts, a passing INTERNAL) and 429, after Retry-After when the
// founder sets it, else after capped exponential backoff with jitter. Any
// other answer ends the call with the founder's error envelope.
//
// With several founders (the replicas of an HA founder) a call that meets a
// network error or a 5xx moves to the next one for its retry: a replica
// that died, or lost its database, hands the joiner to one that did not.
type apiClient struct {
	bases []string // https://HOST:PORT of each founder
	cur   atomic.Uint32
	hc    httpDoer
	bo    backoff
	log   *printer
}

func baseURLs(founders []string) []string {
	out := make([]string, len(founders))
	for i, f := range founders {
		out[i] = "https://" + f
	}
	return out
}

// base is the founder calls go to now.
func (c *apiClient) base() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// failover moves on from base after a transient failure there.
func (c *apiClient) failover(base string) {
	if len(c.bases) < 2 || c.base() != base {
		return
	}
	c.cur.Add(1)
	c.log.printf("%s failed; trying the founder at %s\n", strings.TrimPrefix(base, "https://"), strings.TrimPrefix(c.base(), "https://"))
}

// remoteError is a non-2xx answer, carrying the decoded error envelope
// (SPEC 2); apierr.As finds the envelope in it. Its text is the founder's
// message as sent: that message already says what to do (ask for a new
// token, re-import the release, run with --self-upgrade), so the joiner
// adds no advice of its own to it, which would print the hint twice.
type remoteError struct {
	status int
	err    *apierr.Error
}

func (e *remoteError) Error() string {
	msg := fmt.Sprintf("the founder answered %d %s: %s", e.status, e.err.Code, e.err.Message)
	for _, f := range e.err.Fields {
		if f.Field != "" {
			msg += fmt.Sprintf("; %s: %s", f.Field, f.Message)
		} else {
			msg += "; " + f.Message
		}
	}
	if len(e.err.Details) > 0 {
		if b, err := json.Marshal(e.err.Details); err == nil {
			msg += " " + string(b)
		}
	}
	return msg
}

func (e *remoteError) Unwrap() error { return e.err }

// transientError asks retry for another attempt, after `after` when the
// server said so. progressed marks an attempt that moved forward (bytes
// of a download landed): the backoff then starts over, since the peer is
// evidently there.
type transientError struct {
	err        error
	after      time.Duration
	progressed bool
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// retry runs op until it returns something other than a transientError,
// or ctx ends. Each retry is printed, so an operator watching a joiner
// that waits for its founder sees why.
func retry(ctx context.Context, bo backoff, log *printer, what string, op func(ctx context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := op(ctx)
		var t *transientError
		if !errors.As(err, &t) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if t.progressed {
			attempt = 0
		}
		d := t.after
		if d == 0 {
			d = bo.delay(attempt)
		}
		log.printf("%s", retryNotice(what, t, d))
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

// retryNotice is the line printed before a retry. When the founder said
// when to come back (Retry-After), the advice in its message ("retry after
// the Retry-After delay") is exactly what the joiner now does, so the line
// names the answer's code beside the delay instead of repeating it.
func retryNotice(what string, t *transientError, d time.Duration) string {
	var re *remoteError
	if t.after > 0 && errors.As(t.err, &re) {
		return fmt.Sprintf("%s: the founder answered %d %s; retrying in %s, as it asked", what, re.status, re.err.Code, roundDelay(d))
	}
	return fmt.Sprintf("%s: %v; retrying in %s", what, t.err, roundDelay(d))
}

// roundDelay keeps a printed delay readable: 1.2s, 350ms.
func roundDelay(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

// networkError classifies a failed round trip: a pin failure is final, a
// cancelled run is the caller's, anything else (refused, reset, timeout of
// one attempt) is worth another try.
func networkError(ctx context.Context, err error) error {
	var pe *PinError
	if errors.As(err, &pe) {
		return pe
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &transientError{err: err}
}

// responseError turns a non-2xx answer into a remoteError, transient for
// 5xx and 429.
func responseError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorSize))
	var env apierr.Error
	if err := json.Unmarshal(body, &env); err != nil || env.Code == "" {
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		env = apierr.Error{Code: apierr.Code(fmt.Sprintf("HTTP_%d", resp.StatusCode)), Message: http.StatusText(resp.StatusCode)}
		if snippet != "" {
			env.Message += ": " + snippet
		}
	}
	after := retryAfter(resp.Header, time.Now())
	env.RetryAfter = int(after / time.Second)
	re := &remoteError{status: resp.StatusCode, err: &env}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return &transientError{err: re, after: after}
	}
	return re
}

// callJSON sends body (when non-nil) as JSON and decodes a 2xx answer into
// out (when non-nil). timeout bounds each attempt (a long-poll's hold plus
// slack); 0 means none beyond ctx. It returns the final status code.
func (c *apiClient) callJSON(ctx context.Context, what, method, path string, body, out any, timeout time.Duration) (int, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	status := 0
	err := retry(ctx, c.bo, c.log, what, func(ctx context.Context) error {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, timeout)
		}
		defer cancel()
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		base := c.base()
		req, err := http.NewRequestWithContext(actx, method, base+path, rd)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json")
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			err = networkError(ctx, err)
			if _, ok := err.(*transientError); ok {
				c.failover(base)
			}
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			if resp.StatusCode >= 500 {
				c.failover(base)
			}
			return responseError(resp)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxViewSize+1))
		if err != nil {
			return networkError(ctx, err)
		}
		if len(data) > maxViewSize {
			return fmt.Errorf("%s: the founder's answer is over %d bytes", what, maxViewSize)
		}
		status = resp.StatusCode
		if out != nil && len(bytes.TrimSpace(data)) > 0 {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("%s: the founder's answer is not the expected JSON: %v", what, err)
			}
		}
		return nil
	})
	return status, err
}
