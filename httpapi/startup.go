package httpapi

import "stratum/bootclock"

// Startup tracks the boot phases /startupz reports.
type Startup = bootclock.Clock

// NewStartup starts the clock at the "init" phase.
func NewStartup() *Startup { return bootclock.New() }

// StartupView is the /startupz body.
type StartupView struct {
	State      string `json:"state"`
	Phase      string `json:"phase"`
	PhaseMs    int64  `json:"phaseMs"`
	LastBootMs int64  `json:"lastBootMs"`
}

func startupView(s *Startup) StartupView {
	snap := s.Snapshot()
	return StartupView{State: snap.State(), Phase: snap.Phase, PhaseMs: snap.PhaseMs, LastBootMs: snap.BootMs}
}
