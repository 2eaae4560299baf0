package agent

import (
	"context"
	"time"

	"stratum/apiclient"
)

// The agent calls the founder's admin API with the node's leaf through the
// one founder client (package apiclient). Given the replicas of an HA
// founder (--api a,b), a call that meets a network error or a 5xx moves
// the next call to the next replica. A call is one attempt: the record and
// membership loops back off and retry themselves, so a loop that fails
// keeps collecting the freshest record instead of resending a stale one.

// call sends body as JSON (when not nil) and decodes a 2xx answer into out
// (a *json.RawMessage keeps it as it came).
func (a *Agent) call(ctx context.Context, method, path string, body, out any, timeout time.Duration) error {
	_, err := a.api.Call(ctx, apiclient.Request{Method: method, Path: path, Body: body, Out: out, Timeout: timeout})
	return err
}

// backoff is the wait after consecutive failures of a loop: 1 s doubling
// with jitter, capped at the loop's interval.
type backoff struct {
	apiclient.Backoff
	failures int
}

func newBackoff(interval time.Duration) backoff {
	return backoff{Backoff: apiclient.Backoff{Base: time.Second, Max: max(interval, time.Second)}}
}

func (b *backoff) failed() time.Duration {
	d := b.Delay(b.failures)
	b.failures++
	return d
}

func (b *backoff) succeeded() { b.failures = 0 }

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	return apiclient.Sleep(ctx, d) == nil
}
