package join

import (
	"stratum/wire"
	"sync"
	"time"
)

// Park is Wait for a caller that gives up its goroutine while the hold
// lasts (the HTTP layer hands the connection over and lets its goroutines
// end). When Wait would answer at once, Park returns that view with
// parked false and never calls answer. Otherwise it returns parked true
// and calls answer exactly once, on another goroutine, with the view at
// the moment the state changes, the jittered wait passes or the service
// closes; Close waits for those answers to be written.
//
// ready is closed by the caller once it can answer (it has taken the
// connection over); answer is not called before.
//
// end is nil when the poll was answered at once; otherwise calling it ends
// the hold now (the caller saw its client leave): answer runs as for a
// change, and the hold counted against the registration is given back.
func (s *Service) Park(keyPin, joinID, lastState string, wait time.Duration, ready <-chan struct{}, answer func(wire.JoinerView, error)) (first wire.JoinerView, end func(), err error) {
	wait = min(wait, MaxWait)
	p := &parkedPoll{s: s, keyPin: keyPin, joinID: joinID, ready: ready, answer: answer}
	// Held until the poll is set up: a wake that comes meanwhile waits.
	p.mu.Lock()
	defer p.mu.Unlock()
	// Watch before reading, so a change committed between the read and
	// the watch still ends the hold.
	p.cancel = s.hub.Watch(joinID, p.woken)
	first, err = s.View(keyPin, joinID)
	if err != nil || lastState == "" || first.State != lastState || wait <= 0 {
		p.done = true
		p.cancel()
		return first, nil, err
	}
	// The hold is what SPEC 10.10 caps per registration. (When the HTTP
	// layer cannot take the connection over, it waits with Wait behind
	// this parked poll, which keeps counting for it.)
	if p.release, err = s.holds.acquire(joinID); err != nil {
		p.done = true
		p.cancel()
		return wire.JoinerView{}, nil, err
	}
	p.first = first
	// A poll arriving while the service closes is answered at once: Close
	// may already be waiting for the parked ones.
	s.parkMu.Lock()
	if s.closing {
		s.parkMu.Unlock()
		p.done = true
		p.cancel()
		p.release()
		return first, nil, nil
	}
	s.parked.Add(1)
	s.parkMu.Unlock()
	p.timer = time.AfterFunc(jittered(wait), p.finish)
	return first, func() { go p.finish() }, nil
}

// parkedPoll is one held long-poll: a hub watch and a timer, no goroutine.
type parkedPoll struct {
	s              *Service
	keyPin, joinID string
	first          wire.JoinerView
	ready          <-chan struct{}
	answer         func(wire.JoinerView, error)

	mu      sync.Mutex
	cancel  func() bool
	timer   *time.Timer
	done    bool
	release func() // gives the registration's hold back
}

// woken runs on a change of the registration (or the hub closing): a
// change that leaves the state as it was (another field, or a queue
// move: only a state change answers early, see Wait) watches again;
// anything else answers.
func (p *parkedPoll) woken() {
	select {
	case <-p.s.hub.Done():
		p.finish()
		return
	default:
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.cancel = p.s.hub.Watch(p.joinID, p.woken)
	p.mu.Unlock()
	v, err := p.s.View(p.keyPin, p.joinID)
	if err != nil || v.State != p.first.State {
		p.finish()
	}
}

// finish answers once with the current view.
func (p *parkedPoll) finish() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.cancel()
	p.release()
	p.mu.Unlock()
	defer p.s.parked.Done()
	<-p.ready
	p.answer(p.s.View(p.keyPin, p.joinID))
}
