package founder

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/store"
	"stratum/wire"
)

// A founder whose store was restored from a backup starts isolated
// (cluster.RestoreMark): a drill's copy must not reach the live cluster.
// While isolated it serves the console and the admin API to operators,
// but the loops that reach out (the prober, OpenBao's renewals and
// revocations, the join queue's deliveries and timeouts) skip their
// turns, no OpenBao request is made, and the join listener and every
// node presenting its leaf are answered 503 (httpapi). `stratum takeover`
// (the control socket) ends it for good, audited; the other replicas of
// a shared store see it within takeOverWatch.

// takeOverWatch is how often an isolated founder looks whether another
// replica took the store over.
const takeOverWatch = 2 * time.Second

// isolationMessage is what the banner, the console and the log say.
func isolationMessage(d DataDir) string {
	return "restored from a backup: this founder probes no node, contacts no OpenBao and answers no node or joiner " +
		"until an operator who knows the old founder is gone runs `stratum takeover --data " + string(d) + "` (docs/restore-drill.md)"
}

// startIsolated makes f isolated when its store says it was restored and
// not taken over.
func (f *Founder) startIsolated() {
	if !f.id.Isolated() {
		return
	}
	m := f.id.Restored
	f.isolation.Store(&wire.Isolation{RestoredAt: m.RestoredAt, Backup: m.Backup, Message: isolationMessage(f.opts.Data)})
}

// isolated reports whether f is isolated now.
func (f *Founder) isolated() bool { return f.isolation.Load() != nil }

// isolationView is the isolation for the API, nil when live.
func (f *Founder) isolationView() *wire.Isolation { return f.isolation.Load() }

// goLive ends f's isolation once: the loops that reach out run from
// their next turn, and OpenBao is looked at as at a start.
func (f *Founder) goLive(ctx context.Context, m cluster.RestoreMark) {
	iso := f.isolation.Load()
	if iso == nil || !f.isolation.CompareAndSwap(iso, nil) {
		return
	}
	f.log.Warn("taken over: this founder now serves the cluster (probes its nodes, acts on OpenBao, answers nodes and joiners)",
		"backup", m.Backup, "restoredAt", m.RestoredAt, "by", m.TakenOverBy)
	if f.joins != nil {
		f.joins.Kick()
	}
	if f.openBao != nil {
		go f.checkOpenBao(ctx)
	}
}

// watchTakeOver is the loop body that frees an isolated replica once
// another replica of the shared store was taken over.
func (f *Founder) watchTakeOver(ctx context.Context) {
	if !f.isolated() {
		return
	}
	var id cluster.Identity
	if err := f.db.View(func(tx *store.Tx) error {
		var err error
		id, err = cluster.LoadIdentity(tx)
		return err
	}); err != nil {
		f.log.Warn("reading whether the store was taken over failed", "err", err)
		return
	}
	if !id.Isolated() && id.Restored != nil {
		f.goLive(ctx, *id.Restored)
	}
}

// controlTakeOver is `stratum takeover`: the operator says this restored
// founder is the cluster now.
func (f *Founder) controlTakeOver(w http.ResponseWriter, r *http.Request) {
	var m cluster.RestoreMark
	err := f.db.Update(func(tx *store.Tx) error {
		var err error
		m, err = cluster.TakeOver(tx, "control-socket", time.Now())
		return err
	})
	if e, ok := apierr.As(err); ok && e.Code == apierr.Conflict {
		http.Error(w, e.Message, http.StatusConflict)
		return
	}
	if err != nil {
		f.log.Error("take-over failed", "err", err)
		http.Error(w, "the take-over was not stored: "+err.Error(), http.StatusInternalServerError)
		return
	}
	f.goLive(f.ctx, m)
	fmt.Fprintf(w, "taken over: cluster %s (restored from %s at %s) is served by this founder now; it probes the nodes, acts on OpenBao and answers nodes and joiners (audited as cluster.taken-over)\n",
		f.id.ClusterID, m.Backup, m.RestoredAt.Format(time.RFC3339))
}
