package joiner

import (
	"context"
	"errors"
	"time"

	"stratum/apiclient"
)

// The joiner calls the join listener through the one founder client
// (package apiclient): it retries what can pass (network errors, 5xx such
// as 503 RELEASE_BUSY or UNAVAILABLE while the founder restarts, 429),
// after Retry-After when the founder sets it, else after capped
// exponential backoff with jitter, and prints each retry and failover.
// Any other answer ends the call with the founder's error envelope. With
// several founders (the replicas of an HA founder) a call that meets a
// network error or a 5xx moves to the next one for its retry.

// newAPI is the joiner's founder client over hc.
func newAPI(founders []string, hc apiclient.Doer, bo apiclient.Backoff, log *printer) *apiclient.Client {
	return apiclient.New(apiclient.HTTPS(founders), hc, apiclient.Options{
		Retry:  &bo,
		Notify: log.line,
		Final:  isPinError,
	})
}

// call is one JSON call to the founder; it returns the final status.
func (j *joiner) call(ctx context.Context, what, method, path string, body, out any, timeout time.Duration) (int, error) {
	return j.api.Call(ctx, apiclient.Request{What: what, Method: method, Path: path, Body: body, Out: out, Timeout: timeout})
}

// retry runs op with the joiner's backoff, printing each retry.
func (j *joiner) retry(ctx context.Context, what string, op func(ctx context.Context) error) error {
	return apiclient.Retry(ctx, j.bo, j.log.line, what, op)
}

func isPinError(err error) bool {
	var pe *PinError
	return errors.As(err, &pe)
}

// networkError classifies a failed round trip of a download: a pin
// failure is final, a cancelled run is the caller's, anything else
// (refused, reset, timeout of one attempt) is worth another try.
func networkError(ctx context.Context, err error) error {
	var pe *PinError
	if errors.As(err, &pe) {
		return pe
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &apiclient.TransientError{Err: err}
}
