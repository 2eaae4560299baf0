package apiclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff is capped exponential backoff with jitter: attempt n waits a
// random time in [d/2, d] with d = min(Max, Base*2^n). The jitter spreads
// a rack of nodes that lost the founder at the same moment, so they do not
// all come back in the same millisecond.
type Backoff struct {
	Base, Max time.Duration
}

// Delay is the wait before retry number attempt (0 for the first retry).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Base
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// MaxRetryAfter bounds a server's Retry-After, so a wrong header cannot
// park a client for hours.
const MaxRetryAfter = 5 * time.Minute

// RetryAfter parses Retry-After (seconds or an HTTP date); 0 when absent
// or unusable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if strings.Trim(v, "0123456789") == "" {
		// Seconds, compared as seconds first: a huge value would overflow
		// Duration, and one too large for an int is still "later".
		secs, err := strconv.Atoi(v)
		if err != nil || secs > int(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, MaxRetryAfter)
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// TransientError asks Retry for another attempt, after After when the
// server said so. Progressed marks an attempt that moved forward (bytes of
// a download landed): the backoff then starts over, since the peer is
// evidently there.
type TransientError struct {
	Err        error
	After      time.Duration
	Progressed bool
	// Next is the founder (HOST:PORT) the next attempt goes to when this
	// one failed over from another, so the retry line after "A failed;
	// trying the founder at B" does not read as a return to A.
	Next string
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Retry runs op until it returns something other than a *TransientError,
// or ctx ends. notify (when not nil) gets a line before each retry, so an
// operator watching a client that waits for its founder sees why.
func Retry(ctx context.Context, bo Backoff, notify func(string), what string, op func(ctx context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := op(ctx)
		var t *TransientError
		if !errors.As(err, &t) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if t.Progressed {
			attempt = 0
		}
		d := t.After
		if d == 0 {
			d = bo.Delay(attempt)
		}
		if notify != nil {
			notify(RetryNotice(what, t, d))
		}
		if err := Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// RetryNotice is the line told before a retry. When the founder said when
// to come back (Retry-After), the advice in its message ("retry after the
// Retry-After delay") is exactly what the client now does, so the line
// names the answer's code beside the delay instead of repeating it.
func RetryNotice(what string, t *TransientError, d time.Duration) string {
	var re *RemoteError
	if t.After > 0 && errors.As(t.Err, &re) {
		return fmt.Sprintf("%s: the founder answered %d %s; retrying in %s, as it asked", what, re.Status, re.Err.Code, roundDelay(d))
	}
	if t.Next != "" {
		return fmt.Sprintf("%s: %v; retrying at %s in %s", what, t.Err, t.Next, roundDelay(d))
	}
	return fmt.Sprintf("%s: %v; retrying in %s", what, t.Err, roundDelay(d))
}

// roundDelay keeps a printed delay readable: 1.2s, 350ms.
func roundDelay(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}
