package cluster

// Boot states of a member as the founder's prober sees them (SPEC 11).
const (
	BootReady       = "ready"
	BootStarting    = "starting"
	BootUnreachable = "unreachable"
)

// Boot is a member's boot health, from its agent's /startupz. It is not
// stored: the prober keeps the last answer of each member in memory, and
// a member not probed yet has none.
type Boot struct {
	State   string
	Phase   string
	PhaseMs int64
	// LastBootMs is how long the agent's last start took to be ready.
	LastBootMs int64
}
