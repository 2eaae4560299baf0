package lab

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/labtest"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// waitState waits until h's join is in one of states on the lab's
// founder and answers its view.
func waitState(t *testing.T, lab *labtest.Lab, h *labtest.Host, limit time.Duration, states ...string) wire.OperatorView {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := lab.Registrations(t)[h.KeyFingerprint]
		for _, s := range states {
			if r.State == s {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's join is %q (%s) after %v, want %v", h.Name, r.State, r.Reason, limit, states)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitExit waits for j's joiner to exit within limit and answers its code.
func waitExit(t *testing.T, j *labtest.Join, limit time.Duration) int {
	t.Helper()
	select {
	case <-j.Done():
		return j.Code()
	case <-time.After(limit):
		t.Fatalf("%s's joiner still runs after %v:\n%s", j.Host.Name, limit, j.Output())
		return 0
	}
}

// TestRackLinkCutMidDelivery: a host's link is cut the moment its turn
// comes, so its delivery is sent into a dead link. Cut for less than the
// delivery timeout (host a), the join resumes when the link returns and
// ends joined. Cut for longer (host b), the founder fails the join with
// the timeout as its reason, the next join's turn comes (host c joins
// while b is still cut), and b's joiner, once its link is back, exits 4
// naming the reason, keeping nothing of the delivery its founder's late
// answer may have brought; b never became a member. Each join was
// delivered once.
func TestRackLinkCutMidDelivery(t *testing.T) {
	const deliveryTimeout = 10 * time.Second
	lab := labtest.New(t, labtest.Options{Hosts: 3, NoTPM: true})
	a, b, c := lab.Hosts[0], lab.Hosts[1], lab.Hosts[2]
	lab.StartFounder(t, stratumtest.FounderOptions{Dev: true, Args: []string{"--delivery-timeout", deliveryTimeout.String()}})
	rack := lab.Rack(t, labtest.RackOptions{Held: lab.Hosts})
	for _, h := range lab.Hosts {
		waitState(t, lab, h, 30*time.Second, "pending")
	}

	// a: cut as its turn comes, back after 2 s.
	a.Cut(t)
	rack.Enrollment.Let(t, a)
	waitState(t, lab, a, 10*time.Second, "delivering")
	time.Sleep(2 * time.Second)
	a.Restore(t)
	restored := time.Now()
	if code := waitExit(t, rack.Join(a), deliveryTimeout+5*time.Second); code != 0 {
		t.Fatalf("a's join exited %d after its link came back:\n%s", code, rack.Join(a).Output())
	}
	t.Logf("a: the delivery sent into the cut link arrived once it came back: joined %v later", time.Since(restored).Round(time.Millisecond))

	// b: cut as its turn comes and kept cut past the delivery timeout;
	// c waits behind it.
	b.Cut(t)
	rack.Enrollment.Let(t, b)
	waitState(t, lab, b, 10*time.Second, "delivering")
	rack.Enrollment.Let(t, c)
	if r := waitState(t, lab, c, 5*time.Second, "approved"); r.QueuePosition != 1 {
		t.Fatalf("c waits at queue position %d behind b, want 1", r.QueuePosition)
	}
	failed := waitState(t, lab, b, deliveryTimeout+10*time.Second, "failed")
	if !strings.Contains(failed.Reason, "delivery timeout") {
		t.Errorf("b failed with the reason %q, want the delivery timeout named", failed.Reason)
	}
	// The queue moved on while b is still cut off.
	if code := waitExit(t, rack.Join(c), 30*time.Second); code != 0 {
		t.Fatalf("c's join exited %d after b's failed:\n%s", code, rack.Join(c).Output())
	}
	select {
	case <-rack.Join(b).Done():
		t.Fatalf("b's joiner ended while its link was cut:\n%s", rack.Join(b).Output())
	default:
	}
	b.Restore(t)
	code := waitExit(t, rack.Join(b), 45*time.Second)
	if code != 4 || !strings.Contains(rack.Join(b).Output(), "delivery timeout") {
		t.Errorf("b's joiner exited %d after its link came back, want 4 naming the delivery timeout:\n%s", code, rack.Join(b).Output())
	}
	out := strings.TrimSpace(rack.Join(b).Output())
	t.Logf("b's joiner, once its link came back:\n%s", out[strings.LastIndex(out[:max(0, len(out)-400)], "\n")+1:])

	// The founder's answer that carried b's delivery may reach b once its
	// link is back, after the join failed: b must not keep it (the leaf
	// of a join that did not happen, the cluster's files).
	if bout := rack.Join(b).Output(); strings.Contains(bout, "delivery persisted under") {
		if !strings.Contains(bout, "ended failed: removed its delivery") {
			t.Errorf("b persisted the delivery of its failed join and did not say it removed it:\n%s", bout)
		}
		t.Logf("b received the delivery of its failed join after its link came back, and removed it")
	}
	for _, f := range []string{"etc/stratum/secrets/node.key", "etc/stratum/secrets/node.crt", "etc/stratum/node.yaml", "etc/stratum/bundle.json"} {
		if _, err := os.Stat(filepath.Join(b.Root, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("b keeps %s of its failed join's delivery (%v)", f, err)
		}
	}
	if leaf, err := tls.LoadX509KeyPair(filepath.Join(b.Root, "etc/stratum/secrets/node.crt"), filepath.Join(b.Root, "etc/stratum/secrets/node.key")); err == nil {
		status, _, err := lab.Founder().Node(t, leaf).Do("GET", "/v1/cluster/members", nil, nil)
		if err != nil || (status != http.StatusUnauthorized && status != http.StatusForbidden) {
			t.Errorf("the leaf of b's failed join read the members: %d %v", status, err)
		}
	}
	lab.CheckJoined(t, []*labtest.Host{a, c})
	if m, ok := lab.Members(t)[b.NodeID]; ok {
		t.Errorf("b's failed join left it a member: %+v", m)
	}
	events := lab.Audit(t)
	delivered, timedOut := labtest.AuditCount(events, "join.delivering"), labtest.AuditCount(events, "join.timed-out")
	regs := lab.Registrations(t)
	for _, h := range lab.Hosts {
		if id := regs[h.KeyFingerprint].JoinID; delivered[id] != 1 {
			t.Errorf("%s's join %s was delivered %d times, want once", h.Name, id, delivered[id])
		}
	}
	if id := regs[b.KeyFingerprint].JoinID; timedOut[id] != 1 || len(timedOut) != 1 {
		t.Errorf("timed-out joins: %v, want b's (%s) once", timedOut, id)
	}
	rack.AgentsRunning(t)
}

// TestRackFounderKilledMidRack: the founder is killed with SIGKILL while
// a rack joins, some joins done and one in its turn, and started again
// on the same data directory: every join completes, each delivered once
// and joined once (audit log), every host an active member at its
// address with its release recorded.
func TestRackFounderKilledMidRack(t *testing.T) {
	lab := labtest.New(t, labtest.Options{Hosts: 6, NoTPM: true})
	lab.StartFounder(t, stratumtest.FounderOptions{Dev: true})
	// Agents back off at most their interval while the founder is away.
	rack := lab.Rack(t, labtest.RackOptions{AgentArgs: []string{"--interval", "3s"}})

	// Wait for two joins done and another in its turn.
	var inTurn string
	deadline := time.Now().Add(60 * time.Second)
	for inTurn == "" {
		if time.Now().After(deadline) {
			t.Fatal("no join in its turn after two joined")
		}
		done := 0
		for _, j := range rack.Joins {
			select {
			case <-j.Done():
				done++
			default:
			}
		}
		if done >= len(rack.Joins) {
			t.Fatal("every join ended before the founder could be killed mid-rack")
		}
		if done >= 2 {
			for _, h := range lab.Hosts {
				if r := lab.Registrations(t)[h.KeyFingerprint]; r.State == "delivering" || r.State == "installing" {
					inTurn = h.Name + " " + r.State
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	lab.KillFounder(t)
	killed := time.Now()
	t.Logf("founder killed with %s", inTurn)
	time.Sleep(time.Second)
	lab.RestartFounder(t)

	rack.WaitJoined(t, 2*time.Minute)
	t.Logf("every join ended joined %v after the kill", time.Since(killed).Round(time.Millisecond))
	lab.WaitRecorded(t, lab.Hosts, 30*time.Second)
	lab.CheckJoined(t, lab.Hosts)
	rack.AgentsRunning(t)

	events := lab.Audit(t)
	delivered, joined := labtest.AuditCount(events, "join.delivering"), labtest.AuditCount(events, "join.joined")
	regs := lab.Registrations(t)
	for _, h := range lab.Hosts {
		id := regs[h.KeyFingerprint].JoinID
		if delivered[id] != 1 || joined[id] != 1 {
			t.Errorf("%s's join %s: delivered %d times, joined %d times; want once each", h.Name, id, delivered[id], joined[id])
		}
	}
	if len(delivered) != len(lab.Hosts) {
		t.Errorf("%d joins delivered, want %d: %v", len(delivered), len(lab.Hosts), delivered)
	}
}
