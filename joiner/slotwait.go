package joiner

import (
	"context"
	"errors"
	"time"

	"stratum/apiclient"
	"stratum/apierr"
)

// A founder whose release slots are all taken answers 503 RELEASE_BUSY
// with Retry-After in whole seconds (1..5), and, for a registration it
// keeps in line for the next slot, the details place and retryAfterMs:
// its finer estimate of when that slot comes free. A slot the founder
// keeps for this registration stays idle until it comes back, so the
// joiner follows the finer estimate (never later than Retry-After), and
// says where it stands now and then rather than at every retry.

// slotNoticeEvery is how often a joiner waiting in line says so.
const slotNoticeEvery = 5 * time.Second

// retryRelease is retry for a release file: a refusal that places the
// registration in line for a slot is retried after the founder's estimate.
func (j *joiner) retryRelease(ctx context.Context, what string, op func(ctx context.Context) error) error {
	return j.retry(ctx, what, func(ctx context.Context) error {
		var said time.Time
		for {
			err := op(ctx)
			after, place, ok := slotEstimate(err)
			if !ok {
				return err
			}
			if now := time.Now(); now.Sub(said) >= slotNoticeEvery {
				said = now
				j.log.printf("%s: the founder's release slots are taken; number %d in line for the next one, asking again in %s", what, place, after.Round(10*time.Millisecond))
			}
			if err := apiclient.Sleep(ctx, after); err != nil {
				return err
			}
		}
	})
}

// slotEstimate reads a RELEASE_BUSY refusal that placed the registration
// in line: the delay to come back after (the founder's estimate, at most
// its Retry-After) and the place. ok is false for any other error, and
// for a refusal without an estimate, which the ordinary retry handles.
func slotEstimate(err error) (after time.Duration, place int, ok bool) {
	var t *apiclient.TransientError
	var re *apiclient.RemoteError
	if !errors.As(err, &t) || !errors.As(t.Err, &re) || re.Err.Code != apierr.ReleaseBusy {
		return 0, 0, false
	}
	ms, okMs := re.Err.Details["retryAfterMs"].(float64)
	p, okPlace := re.Err.Details["place"].(float64)
	if !okMs || !okPlace || ms <= 0 || p < 1 {
		return 0, 0, false
	}
	after = time.Duration(ms * float64(time.Millisecond))
	if t.After > 0 {
		after = min(after, t.After)
	}
	return max(after, minSlotWait), int(p), true
}

// minSlotWait bounds how soon the joiner asks again, whatever it is told.
const minSlotWait = 20 * time.Millisecond
