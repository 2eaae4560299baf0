package joiner

import (
	"errors"
	"testing"
	"time"

	"stratum/apiclient"
	"stratum/apierr"
)

// TestSlotEstimate: a RELEASE_BUSY refusal with the founder's place and
// estimate is retried after the estimate, never later than Retry-After
// nor sooner than minSlotWait; anything else is left to the ordinary
// retry.
func TestSlotEstimate(t *testing.T) {
	busy := func(code apierr.Code, after time.Duration, details map[string]any) error {
		return &apiclient.TransientError{After: after, Err: &apiclient.RemoteError{Status: 503, Err: &apierr.Error{Code: code, Details: details}}}
	}
	for _, tc := range []struct {
		name  string
		err   error
		after time.Duration
		place int
		ok    bool
	}{
		{"estimate", busy(apierr.ReleaseBusy, time.Second, map[string]any{"place": 2.0, "retryAfterMs": 300.0}), 300 * time.Millisecond, 2, true},
		{"capped by Retry-After", busy(apierr.ReleaseBusy, time.Second, map[string]any{"place": 1.0, "retryAfterMs": 9000.0}), time.Second, 1, true},
		{"floored", busy(apierr.ReleaseBusy, time.Second, map[string]any{"place": 1.0, "retryAfterMs": 1.0}), minSlotWait, 1, true},
		{"no estimate", busy(apierr.ReleaseBusy, time.Second, nil), 0, 0, false},
		{"no place", busy(apierr.ReleaseBusy, time.Second, map[string]any{"retryAfterMs": 300.0}), 0, 0, false},
		{"another code", busy(apierr.Unavailable, time.Second, map[string]any{"place": 1.0, "retryAfterMs": 300.0}), 0, 0, false},
		{"not remote", &apiclient.TransientError{Err: errors.New("reset")}, 0, 0, false},
		{"nil", nil, 0, 0, false},
	} {
		after, place, ok := slotEstimate(tc.err)
		if after != tc.after || place != tc.place || ok != tc.ok {
			t.Errorf("%s: %v %d %v, want %v %d %v", tc.name, after, place, ok, tc.after, tc.place, tc.ok)
		}
	}
}
