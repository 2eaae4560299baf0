// Package bootclock tracks a process's boot phases for its /startupz: the
// founder's (SPEC 1) and the node agent's (SPEC 11).
package bootclock

import (
	"sync"
	"time"
)

// Clock tracks the boot phases of one process start.
type Clock struct {
	mu         sync.Mutex
	bootStart  time.Time
	phase      string
	phaseStart time.Time
	ready      bool
	boot       time.Duration
}

// New starts the clock at the "init" phase.
func New() *Clock {
	now := time.Now()
	return &Clock{bootStart: now, phase: "init", phaseStart: now}
}

// Phase enters a named boot phase. After Ready it names what the ready
// process is doing; it does not make it starting again.
func (c *Clock) Phase(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase != name {
		c.phase, c.phaseStart = name, time.Now()
	}
}

// Ready marks the boot done: the phase becomes "serving" and the boot's
// duration is kept.
func (c *Clock) Ready() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready {
		return
	}
	c.ready = true
	c.phase = "serving"
	c.phaseStart = time.Now()
	c.boot = time.Since(c.bootStart)
}

// Snapshot is the clock at one moment.
type Snapshot struct {
	Ready   bool
	Phase   string
	PhaseMs int64
	// BootMs is how long the boot took to be ready; 0 while starting.
	BootMs int64
}

// State is "ready" or "starting", the words /startupz answers.
func (s Snapshot) State() string {
	if s.Ready {
		return "ready"
	}
	return "starting"
}

// Snapshot reads the clock.
func (c *Clock) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{Ready: c.ready, Phase: c.phase, PhaseMs: time.Since(c.phaseStart).Milliseconds()}
	if c.ready {
		s.BootMs = c.boot.Milliseconds()
	}
	return s
}
