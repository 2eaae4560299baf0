package agent

import (
	"encoding/json"
	"net/http"
	"sync"

	"stratum/bootclock"
)

// readiness moves the boot clock: ready once the founder accepted a
// record and a generation was applied, whichever comes last.
type readiness struct {
	mu      sync.Mutex
	clock   *bootclock.Clock
	record  bool
	members bool
}

func (r *readiness) recorded() { r.set(func() { r.record = true }) }
func (r *readiness) applied()  { r.set(func() { r.members = true }) }

func (r *readiness) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	switch {
	case !r.record:
		r.clock.Phase("record")
	case !r.members:
		r.clock.Phase("membership")
	default:
		r.clock.Ready()
	}
}

// startupzView is the agent's /startupz body (SPEC 11).
type startupzView struct {
	State   string `json:"state"`
	Phase   string `json:"phase"`
	PhaseMs int64  `json:"phaseMs"`
	BootMs  int64  `json:"bootMs"`
}

// startupzHandler answers GET /startupz; nothing else is served.
func startupzHandler(clock *bootclock.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path != "/startupz" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": "NOT_FOUND", "message": "the agent serves only GET /startupz"})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": "METHOD_NOT_ALLOWED", "message": r.Method + " is not allowed on /startupz"})
			return
		}
		s := clock.Snapshot()
		_ = json.NewEncoder(w).Encode(startupzView{State: s.State(), Phase: s.Phase, PhaseMs: s.PhaseMs, BootMs: s.BootMs})
	})
}
