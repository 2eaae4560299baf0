package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"stratum/apierr"
)

// Size limits of the founder's answers: a members list of a large cluster
// stays far below maxAnswer; an error envelope is a few sentences.
const (
	maxAnswer = 16 << 20
	maxError  = 64 << 10
)

// client calls the founder's admin API with the node's leaf. Given the
// replicas of an HA founder (--api a,b), a call that meets a network
// error or a 5xx moves the next call to the next replica.
type client struct {
	bases []string // https://HOST:PORT of each founder
	cur   atomic.Uint32
	hc    *http.Client
}

// base is the founder calls go to now.
func (c *client) base() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// failover moves on from base after a failure there.
func (c *client) failover(base string) {
	if len(c.bases) > 1 && c.base() == base {
		c.cur.Add(1)
	}
}

// remoteError is a non-2xx answer with its envelope (SPEC 2).
type remoteError struct {
	status int
	err    *apierr.Error
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("the founder answered %d %s: %s", e.status, e.err.Code, e.err.Message)
}

func (e *remoteError) Unwrap() error { return e.err }

// call sends body as JSON (when not nil) and returns the raw answer of a
// 2xx, or the founder's error.
func (c *client) call(ctx context.Context, method, path string, body any, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	base := c.base()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		c.failover(base)
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		c.failover(base)
	}
	if resp.StatusCode/100 == 2 {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
		if err == nil && len(raw) > maxAnswer {
			err = fmt.Errorf("the founder's answer to %s %s is larger than %d bytes", method, path, maxAnswer)
		}
		return raw, err
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxError))
	var env apierr.Error
	if json.Unmarshal(raw, &env) != nil || env.Code == "" {
		env = apierr.Error{Code: apierr.Internal, Message: fmt.Sprintf("an answer that is not an error envelope (%d bytes)", len(raw))}
	}
	return nil, &remoteError{status: resp.StatusCode, err: &env}
}

// backoff is the wait after consecutive failures: 1 s doubling, capped.
type backoff struct {
	cap  time.Duration
	next time.Duration
}

func (b *backoff) failed() time.Duration {
	if b.next == 0 {
		b.next = time.Second
	}
	d := b.next
	b.next = min(b.next*2, b.cap)
	return d
}

func (b *backoff) succeeded() { b.next = 0 }

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
