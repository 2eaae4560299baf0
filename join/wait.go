package join

import (
	"context"
	"math/rand/v2"
	"time"

	"stratum/store"
	"stratum/wire"
)

// MaxWait caps a long-poll hold (SPEC 4.3: S above 60 is taken as 60).
const MaxWait = 60 * time.Second

// View answers the joiner's view of its registration. Another key gets
// exactly what an unknown id gets: existence is not revealed.
func (s *Service) View(keyPin, joinID string) (wire.JoinerView, error) {
	var out wire.JoinerView
	err := s.view(func(tx *store.Tx) error {
		r, found, err := getRecord(tx, joinID)
		if err != nil {
			return err
		}
		if !found || r.KeyPin != keyPin || keyPin == "" {
			return notFound(joinID)
		}
		out, err = s.joinerView(tx, r)
		return err
	})
	return out, err
}

// Wait is the long-poll: it answers at once when lastState is empty or
// differs from the current state; otherwise it holds until the state
// changes, wait (+0-5% jitter, so a fleet that started together does not
// return together) passes, ctx ends or the hub closes, and then answers
// the current view. Only a state change answers early: an approved
// joiner's queue position reaches it at the end of each hold (at most a
// minute late), so a long queue moving up does not wake every waiter
// behind it at every turn.
//
// The waiter holds no goroutine of its own: it selects on the
// registration's broadcast channel, one timer and ctx.
func (s *Service) Wait(ctx context.Context, keyPin, joinID, lastState string, wait time.Duration) (wire.JoinerView, error) {
	wait = min(wait, MaxWait)
	// Subscribe before reading, so a change committed between the read
	// and the select still wakes this waiter.
	sub := s.hub.Subscribe(joinID)
	defer sub.Cancel()
	first, err := s.View(keyPin, joinID)
	if err != nil || lastState == "" || first.State != lastState || wait <= 0 {
		return first, err
	}
	read := func() (wire.JoinerView, error) { return s.View(keyPin, joinID) }
	return hold(ctx, s.hub, sub, wait, read, func(v wire.JoinerView) bool { return v.State != first.State })
}

// hold is a long-poll's wait after its first read: until a wake of sub
// finds changed, wait (+0-5% jitter) passes, ctx ends or the hub closes;
// then it answers read's current value.
func hold[V any](ctx context.Context, hub *Hub, sub *Sub, wait time.Duration, read func() (V, error), changed func(V) bool) (V, error) {
	timer := time.NewTimer(jittered(wait))
	defer timer.Stop()
	for {
		select {
		case <-sub.C():
		case <-timer.C:
			return read()
		case <-ctx.Done():
			return read()
		case <-hub.Done():
			return read()
		}
		sub.Renew()
		v, err := read()
		if err != nil || changed(v) {
			return v, err
		}
	}
}

func jittered(d time.Duration) time.Duration {
	return d + time.Duration(rand.Float64()*0.05*float64(d))
}
