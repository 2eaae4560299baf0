package founder

import (
	"context"
	"time"
)

// One scheduler for every background loop of the founder: each runs on
// its own goroutine until the founder stops. A periodic loop (run) runs at
// start (unless later) and then every interval; an event-driven loop
// (step) answers when it is due again (< 0: only when woken) and is woken
// early by its wake channel (the join queue's timeouts). A leased loop
// runs only on the replica holding the store's background lease, checked
// at each turn (a bbolt founder always holds it; on a shared database the
// lease moves when its holder dies): a periodic one looks again at its
// next interval, an event-driven one after leaseRecheck.

// leaseRecheck is how often an event-driven leased loop on a replica
// without the lease looks whether it got it.
const leaseRecheck = time.Second

// loop is one background job: run (periodic, every) or step (event-driven).
type loop struct {
	name   string
	every  time.Duration
	leased bool
	later  bool // first run after one interval, not at start
	// reachesOut: the loop reaches nodes or OpenBao, so it skips its turns
	// while a restored founder is isolated (isolation.go), looking again
	// as a leased loop does.
	reachesOut bool
	run        func(ctx context.Context)
	// step does the work of an event-driven loop and answers when it is
	// due again; wake makes it due at once.
	step func(ctx context.Context) time.Duration
	wake <-chan struct{}
}

// loops are the founder's background jobs; a job that has nothing to do
// on this founder (no OpenBao, a bbolt store, no prober, never isolated)
// is left out.
func (f *Founder) loops() []loop {
	ls := []loop{
		{name: "record the founder's own release", every: selfRecordEvery, run: f.recordOwnRelease},
		{name: "purge expired sessions", every: time.Hour, leased: true, run: f.purgeSessions},
		{name: "time out deliveries, settle OpenBao tokens", leased: true, reachesOut: true, step: f.joins.Step, wake: f.joins.Wake()},
	}
	if f.prober != nil {
		ls = append(ls, loop{name: "probe the members' boot health", every: f.prober.Interval(), reachesOut: true, run: f.prober.Round})
	}
	if f.isolated() {
		ls = append(ls, loop{name: "watch for a take-over by another replica", every: takeOverWatch, later: true, run: f.watchTakeOver})
	}
	if f.db.SharesLocks() {
		ls = append(ls, loop{name: "watch for foreign lock holders", every: time.Second, run: f.watchForeignHolders()})
	}
	if f.db.KeepsContent() {
		ls = append(ls, loop{name: "collect the content of killed imports", every: 5 * time.Minute, leased: true, run: f.collectOrphanedContent})
	}
	if f.openBao != nil {
		ls = append(ls, loop{name: "renew the OpenBao token", every: openBaoRenewEvery, later: true, reachesOut: true, run: f.renewOpenBao})
	}
	return ls
}

// schedule starts every loop.
func (f *Founder) schedule(ctx context.Context, loops ...loop) {
	for _, l := range loops {
		go f.runLoop(ctx, l)
	}
}

func (f *Founder) runLoop(ctx context.Context, l loop) {
	var first time.Duration
	if l.later {
		first = l.every
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.wake: // nil for a periodic loop: never
			timer.Stop()
		}
		next := l.every
		switch {
		case l.leased && !f.db.HoldsLease(), l.reachesOut && f.isolated():
			if l.step != nil {
				next = leaseRecheck
			}
		case l.step != nil:
			next = l.step(ctx)
		default:
			l.run(ctx)
		}
		if next >= 0 {
			timer.Reset(next)
		}
	}
}
