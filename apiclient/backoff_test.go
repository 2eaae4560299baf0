package apiclient

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second}
	for attempt := range 20 {
		d := b.Delay(attempt)
		ceil := min(b.Base<<min(attempt, 10), b.Max)
		if d < ceil/2 || d > ceil {
			t.Errorf("attempt %d: %s outside [%s, %s]", attempt, d, ceil/2, ceil)
		}
	}
	h := http.Header{}
	now := time.Now()
	if RetryAfter(h, now) != 0 {
		t.Error("absent Retry-After")
	}
	h.Set("Retry-After", "3")
	if RetryAfter(h, now) != 3*time.Second {
		t.Error("seconds")
	}
	h.Set("Retry-After", now.Add(10*time.Second).UTC().Format(http.TimeFormat))
	if d := RetryAfter(h, now); d < 8*time.Second || d > 11*time.Second {
		t.Errorf("date: %s", d)
	}
	h.Set("Retry-After", "999999")
	if RetryAfter(h, now) != MaxRetryAfter {
		t.Error("not capped")
	}
}

// FuzzResponseError: a founder's non-2xx answer. Any body becomes a
// *RemoteError with a code; a Retry-After is honored within
// [0, MaxRetryAfter], and a whole number of seconds at or above the cap
// is the cap.
func FuzzResponseError(f *testing.F) {
	for _, s := range []string{`{"code":"CONFLICT","message":"x"}`, `{"code":"INVALID_INPUT","message":"m","fields":[{"field":"a","message":"b"}]}`, ``, `<html>`, `{"code":""}`, strings.Repeat("x", 300)} {
		f.Add(409, s, "")
		f.Add(503, s, "30")
	}
	for _, ra := range []string{"0", "-5", "300", "301", "99999999999", "Wed, 21 Oct 2015 07:28:00 GMT", " 7 ", "1e3"} {
		f.Add(429, `{"code":"TOO_MANY_REQUESTS","message":"slow down"}`, ra)
	}
	f.Fuzz(func(t *testing.T, status int, body, retry string) {
		if status < 100 || status > 999 {
			status = 400 + (status&0xff)%200
		}
		h := http.Header{}
		if retry != "" {
			h.Set("Retry-After", retry)
		}
		resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader([]byte(body)))}
		err := ResponseError(resp)
		if err == nil || err.Error() == "" {
			t.Fatal("no error for a non-2xx answer")
		}
		d := RetryAfter(h, time.Now())
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("Retry-After %q gave %v", retry, d)
		}
		if n, perr := strconv.ParseUint(strings.TrimSpace(retry), 10, 64); perr == nil && n >= uint64(MaxRetryAfter/time.Second) && d != MaxRetryAfter {
			t.Fatalf("Retry-After %q gave %v, want the cap %v", retry, d, MaxRetryAfter)
		}
	})
}
