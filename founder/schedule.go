package founder

import (
	"context"
	"time"
)

// One scheduler for the founder's periodic background work: each loop
// runs on its own goroutine, at start (unless later) and then every
// interval until the founder stops. A leased loop runs only on the
// replica holding the store's background lease, checked at each turn (a
// bbolt founder always holds it; on a shared database the lease moves
// when its holder dies). Event-driven loops (the join queue's timeouts,
// the boot prober) keep their own timing.

// loop is one periodic job.
type loop struct {
	name   string
	every  time.Duration
	leased bool
	later  bool // first run after one interval, not at start
	run    func(ctx context.Context)
}

// loops are the founder's periodic jobs; a job that has nothing to do on
// this founder (no OpenBao, a bbolt store) is left out.
func (f *Founder) loops() []loop {
	ls := []loop{
		{name: "record the founder's own release", every: selfRecordEvery, run: f.recordOwnRelease},
		{name: "purge expired sessions", every: time.Hour, leased: true, run: f.purgeSessions},
	}
	if f.db.SharesLocks() {
		ls = append(ls, loop{name: "watch for foreign lock holders", every: time.Second, run: f.watchForeignHolders()})
	}
	if f.db.KeepsContent() {
		ls = append(ls, loop{name: "collect the content of killed imports", every: 5 * time.Minute, leased: true, run: f.collectOrphanedContent})
	}
	if f.openBao != nil {
		ls = append(ls, loop{name: "renew the OpenBao token", every: openBaoRenewEvery, later: true, run: f.renewOpenBao})
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
	t := time.NewTicker(l.every)
	defer t.Stop()
	due := !l.later
	for {
		if due && (!l.leased || f.db.HoldsLease()) {
			l.run(ctx)
		}
		due = true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
