package join

import (
	"errors"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/wire"
)

// TestLongPollCapPerRegistration: a registration holds at most four
// long-polls; the fifth is 429 with Retry-After, an answer at once is
// no hold, and a hold that ends frees its place.
func TestLongPollCapPerRegistration(t *testing.T) {
	e := newEnv(t)
	v := e.pending("a")
	ready := make(chan struct{})
	close(ready)
	answered := make(chan wire.JoinerView, 8)
	answer := func(v wire.JoinerView, _ error) { answered <- v }
	park := func(state string) (bool, error) {
		_, end, err := e.svc.Park(keyPin("a"), v.JoinID, state, time.Minute, ready, answer)
		return end != nil, err
	}
	for i := range MaxHoldsPerRegistration {
		if parked, err := park(wire.StatePending); !parked || err != nil {
			t.Fatalf("hold %d: parked %v, %v", i+1, parked, err)
		}
	}
	_, err := park(wire.StatePending)
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code != apierr.TooManyRequests || ae.RetryAfter < 1 {
		t.Fatalf("fifth hold: %v, want TOO_MANY_REQUESTS with Retry-After", err)
	}
	if parked, err := park(""); parked || err != nil {
		t.Fatalf("an answer at once: parked %v, %v", parked, err)
	}
	// Another registration is not limited by this one's holds.
	w := e.pending("b")
	if _, end, err := e.svc.Park(keyPin("b"), w.JoinID, wire.StatePending, time.Minute, ready, answer); end == nil || err != nil {
		t.Fatalf("another registration: parked %v, %v", end != nil, err)
	}
	// A state change answers the four; their places are free again.
	if _, err := e.svc.Reject(e.admin, v.JoinID, "test"); err != nil {
		t.Fatal(err)
	}
	for range MaxHoldsPerRegistration {
		select {
		case <-answered:
		case <-time.After(5 * time.Second):
			t.Fatal("a parked poll was not answered")
		}
	}
	if parked, err := park(wire.StateRejected); !parked || err != nil {
		t.Fatalf("a hold after the others ended: parked %v, %v", parked, err)
	}
	e.svc.Close()
}
