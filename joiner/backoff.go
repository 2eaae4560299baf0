package joiner

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// backoff is capped exponential backoff with jitter: attempt n waits a
// random time in [d/2, d] with d = min(max, base*2^n). The jitter spreads
// a rack of joiners that lost the founder at the same moment, so they do
// not all come back in the same millisecond.
type backoff struct {
	base, max time.Duration
}

func (b backoff) delay(attempt int) time.Duration {
	d := b.base
	for i := 0; i < attempt && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// maxRetryAfter bounds a server's Retry-After, so a wrong header cannot
// park the joiner for hours.
const maxRetryAfter = 5 * time.Minute

// retryAfter parses Retry-After (seconds or an HTTP date); 0 when absent
// or unusable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if strings.Trim(v, "0123456789") == "" {
		// Seconds, compared as seconds first: a huge value would overflow
		// Duration, and one too large for an int is still "later".
		secs, err := strconv.Atoi(v)
		if err != nil || secs > int(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
