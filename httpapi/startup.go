package httpapi

import (
	"sync"
	"time"
)

// Startup tracks the boot phases /startupz reports.
type Startup struct {
	mu         sync.Mutex
	bootStart  time.Time
	phase      string
	phaseStart time.Time
	ready      bool
	lastBoot   time.Duration
}

// NewStartup starts the clock at the "init" phase.
func NewStartup() *Startup {
	now := time.Now()
	return &Startup{bootStart: now, phase: "init", phaseStart: now}
}

// Phase enters a named boot phase.
func (s *Startup) Phase(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.phaseStart = name, time.Now()
}

// Ready marks the boot done.
func (s *Startup) Ready() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = true
	s.phase = "serving"
	s.phaseStart = time.Now()
	s.lastBoot = time.Since(s.bootStart)
}

// StartupView is the /startupz body.
type StartupView struct {
	State      string `json:"state"`
	Phase      string `json:"phase"`
	PhaseMs    int64  `json:"phaseMs"`
	LastBootMs int64  `json:"lastBootMs"`
}

// View snapshots the state.
func (s *Startup) View() StartupView {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := StartupView{State: "starting", Phase: s.phase, PhaseMs: time.Since(s.phaseStart).Milliseconds()}
	if s.ready {
		v.State = "ready"
		v.LastBootMs = s.lastBoot.Milliseconds()
	}
	return v
}
