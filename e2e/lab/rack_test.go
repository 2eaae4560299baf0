package lab

import (
	"os"
	"strconv"
	"testing"
	"time"

	"stratum/internal/labtest"
	"stratum/internal/stratumtest"
)

// hosts is the rack's size: LAB_HOSTS (make lab N=50), else def.
func hosts(t *testing.T, def int) int {
	s := os.Getenv("LAB_HOSTS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > labtest.MaxHosts {
		t.Fatalf("LAB_HOSTS=%q: want 1 to %d", s, labtest.MaxHosts)
	}
	return n
}

// TestRack: a rack of hosts (4; LAB_HOSTS for more) boots at once, each
// in its own network namespace with its own address and TPM, and joins
// the founder in its namespace, zero-touch: the founder holds the
// inventory of the rack (each machine by its EK certificate's hash) and
// trusts the lab's TPM manufacturer; every joiner proves its TPM and is
// approved by the inventory, no person approving anything; every join is
// delivered one at a time and ends joined, each host an active member at
// its own address, its agent running and its release recorded in the
// release set.
func TestRack(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Hosts: hosts(t, 4)})
	lab.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	rack := lab.Rack(t, labtest.RackOptions{})
	n := len(lab.Hosts)
	joined := rack.WaitJoined(t, 30*time.Second+2*time.Second*time.Duration(n))
	recorded := lab.WaitRecorded(t, lab.Hosts, 30*time.Second).Sub(rack.Started)
	lab.CheckJoined(t, lab.Hosts)
	rack.AgentsRunning(t)

	// Approved by the inventory on each TPM's proof; one delivery each,
	// each in its own turn.
	events := lab.Audit(t)
	lab.CheckZeroTouch(t, lab.Hosts, events)
	delivered := labtest.AuditCount(events, "join.delivering")
	joinedEvents := labtest.AuditCount(events, "join.joined")
	for _, h := range lab.Hosts {
		id := rack.Enrollment.JoinID(t, h)
		if id == "" || delivered[id] != 1 || joinedEvents[id] != 1 {
			t.Errorf("%s: join %q delivered %d times, joined %d times", h.Name, id, delivered[id], joinedEvents[id])
		}
	}
	if len(delivered) != n {
		t.Errorf("%d joins delivered, want %d", len(delivered), n)
	}
	t.Logf("%d hosts: every one joined zero-touch %v and recorded in the release set %v after the joiners started", n, joined.Round(time.Millisecond), recorded.Round(time.Millisecond))
}
