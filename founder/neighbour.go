package founder

import (
	"context"
	"fmt"

	"stratum/store"
)

// The PostgreSQL neighbour (SPEC 16.7): other roles of the database
// server. At start a founder refuses a database every role may connect
// to; while it serves it reports sessions that are not founders holding
// the cluster's locks (the log here, the metric and /readyz elsewhere).

// checkPublicConnect refuses to start on a database PUBLIC may connect
// to, naming the statement that fixes it, unless the operator allowed it;
// then it warns at every start.
func (f *Founder) checkPublicConnect() error {
	public, revoke, err := f.db.PublicConnect()
	if err != nil || !public {
		return err
	}
	if !f.opts.AllowPublicConnect {
		return fmt.Errorf("every role of the PostgreSQL server may connect to the store's database (PUBLIC holds CONNECT). "+
			"As the database's owner run:\n    %s\nand grant CONNECT to the founders' role only (docs/HA.md), "+
			"or start with --allow-public-connect", revoke)
	}
	if !f.opts.JSONBanner { // in JSON the warning below is the line
		fmt.Fprintf(f.opts.Out, "WARNING: every role of the PostgreSQL server may connect to the store's database (--allow-public-connect); run %s\n", revoke)
	}
	f.log.Warn("every role of the PostgreSQL server may connect to the store's database (--allow-public-connect)", "fix", revoke)
	return nil
}

// watchForeignHolders returns the loop body that logs each session that
// is not a founder found holding one of the cluster's locks, once while
// it holds it.
func (f *Founder) watchForeignHolders() func(context.Context) {
	logged := map[string]bool{}
	return func(context.Context) {
		now := map[string]bool{}
		for _, h := range f.db.ForeignHolders() {
			k := fmt.Sprintf("%s/%d", h.Lock, h.PID)
			now[k] = true
			if !logged[k] {
				f.log.Error("a database session that is not a founder holds the cluster's "+h.Lock+" lock", "pid", h.PID, "user", h.User, "application", h.Application,
					"effect", foreignEffect(h.Lock))
			}
		}
		logged = now
	}
}

func foreignEffect(lock string) string {
	if lock == "writer" {
		return "every founder write waits until it lets go"
	}
	return "no founder runs the background work (delivery timeouts, purges, the prober) while it holds it"
}

// Degraded is the store as /readyz sees it: the sessions that are not
// founders holding the cluster's locks.
func (h storeHealth) Degraded() []store.ForeignHolder { return h.db.ForeignHolders() }
