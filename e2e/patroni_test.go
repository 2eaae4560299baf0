package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"stratum/internal/freeport"
	"stratum/internal/syncbuf"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stratum/internal/patronitest"
	"stratum/internal/stratumtest"
)

// TestPatroniFailover is SPEC 18's failover under the PostgreSQL HA stack
// the seeds' clusters run: etcd and two PostgreSQL 15 servers under
// Patroni with synchronous replication (internal/patronitest), two
// founder processes on the multi-host DSN with
// target_session_attrs=read-write. Under a stream of token writes,
// registrations and approvals through both founders: a Patroni
// switchover, then a SIGKILL of the primary's postmaster (each only once
// the synchronous standby streams). No acknowledged write is lost, each
// founder acknowledges writes again within 30 s of each fault, and a real
// joiner registered before the faults and long-polling through them only
// retries: it ends joined.
//
// STRATUM_FAILOVER_ROUNDS (make failover) repeats the pair of faults.
func TestPatroniFailover(t *testing.T) {
	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("STRATUM_FAILOVER_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	c := patronitest.Start(t)
	dsn := c.DSN()
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "a"), filepath.Join(root, "b")
	a := stratumtest.ServeDev(t, dirA, "--store", dsn)
	b := a.Replica(t, dirB, dsn)
	founders := []*stratumtest.Founder{a, b}
	email, password := credentials(t, dirA)
	admin := a.Login(t, email, password).Token
	caFile := filepath.Join(dirA, "ca.pem")

	// A real node joined before the faults runs `stratum agent` with both
	// founders: it records its release every second through every fault.
	node, nodeOut, nodeDone := startJoiner(t, a, b, workerToken(t, a, admin), caFile, "patroni-node", "127.0.0.5")
	approveByHostname(t, a, admin, "patroni-node") // A runs --dev: a loopback node address is its lab's
	select {
	case err := <-nodeDone:
		if err != nil || !strings.Contains(nodeOut.String(), "state: joined") {
			t.Fatalf("the first joiner ended with %v:\n%s", err, nodeOut)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the first joiner did not end joined within 60 s:\n%s", nodeOut)
	}
	nodeID := stratumtest.NodeID(t, node)
	agentOut, agentDone := startAgent(t, a, b, node, "127.0.0.5")

	// A real joiner given both founders registers now and long-polls
	// through every fault; it is approved after them.
	_, joinerOut, joinerDone := startJoiner(t, a, b, workerToken(t, a, admin), caFile, "patroni-joiner", "10.76.0.1")

	s := &failoverStream{founders: founders, admin: admin, caFile: caFile, t: t}
	s.start()
	time.Sleep(2 * time.Second) // a stream before the first fault

	type faultResult struct {
		name            string
		outage          time.Duration // longest time a founder refused writes
		served          []time.Duration
		acked, refused  int
		newPrimary, was string
	}
	var results []faultResult
	for round := 0; round < rounds; round++ {
		for _, fault := range []string{"switchover", "kill postmaster"} {
			if err := c.WaitSyncStreaming(90 * time.Second); err != nil {
				s.stop()
				t.Fatal(err)
			}
			before := c.Primary()
			ackedBefore, refusedBefore := s.counts()
			at := time.Now()
			s.mark(at)
			switch fault {
			case "switchover":
				if _, err := c.Switchover(); err != nil {
					s.stop()
					t.Fatal(err)
				}
			default:
				if _, _, err := c.KillPrimaryPostmaster(); err != nil {
					s.stop()
					t.Fatal(err)
				}
			}
			// Every founder acknowledges a write begun once the fault
			// happened (patronictl returns when the switchover is done).
			done := time.Now()
			served := make([]time.Duration, len(founders))
			for i := range founders {
				d, ok := s.servedAgain(i, at, done, 30*time.Second)
				if !ok {
					s.stop()
					t.Fatalf("round %d, %s: founder %d acknowledged no write within 30 s: %s", round, fault, i, c.Describe())
				}
				served[i] = d
			}
			time.Sleep(time.Second) // the stream goes on past the recovery
			acked, refused := s.counts()
			r := faultResult{name: fault, outage: s.outage(at), served: served, acked: acked - ackedBefore, refused: refused - refusedBefore}
			if before != nil {
				r.was = before.Name
			}
			if p := c.Primary(); p != nil {
				r.newPrimary = p.Name
			}
			results = append(results, r)
			t.Logf("round %d %-15s primary %s -> %s: longest refusal %v, each founder served again after %v; writes acked %d, refused %d",
				round, fault, r.was, r.newPrimary, r.outage.Round(time.Millisecond), roundAll(served), r.acked, r.refused)
		}
	}
	time.Sleep(time.Second)
	s.stop()

	// The agent still runs and recorded after the last fault.
	select {
	case err := <-agentDone:
		t.Fatalf("the agent exited (%v) during the faults:\n%s", err, agentOut)
	default:
	}
	lastFault := s.marks[len(s.marks)-1]
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if at := recordedAt(t, b, admin, nodeID); at.After(lastFault) {
			t.Logf("the agent recorded %v after the last fault", at.Sub(lastFault).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent recorded nothing after the last fault:\n%s", agentOut)
		}
	}

	// Every acknowledged write is there, read through each founder.
	acked, refused := s.counts()
	for i, f := range founders {
		have := tokenIDs(t, f, admin)
		var lost []string
		for _, id := range s.tokens {
			if !have[id] {
				lost = append(lost, id)
			}
		}
		if len(lost) > 0 {
			t.Errorf("%d of %d acknowledged tokens missing through founder %d: %v", len(lost), len(s.tokens), i, lost)
		}
	}
	for _, id := range s.registrations {
		state := registrationState(t, b, admin, id)
		if state == "" {
			t.Errorf("acknowledged registration %s is missing", id)
		}
	}
	for _, id := range s.approvals {
		if state := registrationState(t, b, admin, id); state != "approved" && state != "delivering" {
			t.Errorf("acknowledged approval of %s: the registration is %q", id, state)
		}
	}
	t.Logf("writes acknowledged %d (tokens %d, registrations %d, approvals %d), refused %d; all acknowledged ones read back through both founders",
		acked, len(s.tokens), len(s.registrations), len(s.approvals), refused)

	// The stream's registrations leave the queue; the real joiner, which
	// long-polled through every fault, is approved and ends joined.
	for _, id := range s.registrations {
		switch registrationState(t, b, admin, id) {
		case "delivering":
			_, _, _ = call(b, "POST", "/v1/admin/join/registrations/"+id+"/cancel", admin, map[string]any{"reason": "test"})
		case "pending", "approved":
			_, _, _ = call(b, "POST", "/v1/admin/join/registrations/"+id+"/reject", admin, map[string]any{"reason": "test"})
		}
	}
	approveByHostname(t, b, admin, "patroni-joiner")
	select {
	case err := <-joinerDone:
		if err != nil || !strings.Contains(joinerOut.String(), "state: joined") {
			t.Fatalf("the joiner ended with %v:\n%s", err, joinerOut)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the joiner did not end joined within 60 s of its approval:\n%s", joinerOut)
	}
	if !strings.Contains(joinerOut.String(), "trying the founder at") && !strings.Contains(joinerOut.String(), "retry") {
		t.Logf("the joiner saw no refusal during the faults:\n%s", joinerOut)
	}

	var worst time.Duration
	for _, r := range results {
		for _, d := range r.served {
			worst = max(worst, d)
		}
	}
	t.Logf("FAILOVER SUMMARY rounds=%d faults=%d worst served-again=%v writes acked=%d refused=%d lost=0",
		rounds, len(results), worst.Round(time.Millisecond), acked, refused)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// startAgent runs `stratum agent --api A,B` on a joined node's root,
// recording every second.
func startAgent(t *testing.T, a, b *stratumtest.Founder, root, ip string) (*syncbuf.Buffer, chan error) {
	t.Helper()
	if raw, err := os.ReadFile("/etc/os-release"); err == nil {
		_ = os.WriteFile(filepath.Join(root, "etc/os-release"), raw, 0o644)
	}
	cmd := exec.Command(stratumtest.Binary(t), "agent", "--api", "https://"+a.API+",https://"+b.API, "--root", root,
		"--listen", net.JoinHostPort(ip, strconv.Itoa(freeport.Must(t, ip))), "--interval", "1s")
	cmd.Env = env()
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return out, done
}

// recordedAt is when the release set last heard from node.
func recordedAt(t *testing.T, f *stratumtest.Founder, admin, node string) time.Time {
	t.Helper()
	status, body, err := call(f, "GET", "/v1/admin/upgrades/release", admin, nil)
	var set struct {
		Nodes []struct {
			NodeID  string `json:"nodeId"`
			Release struct {
				RecordedAt *time.Time `json:"recordedAt"`
			} `json:"release"`
		} `json:"nodes"`
	}
	if err != nil || status != 200 || json.Unmarshal(body, &set) != nil {
		return time.Time{}
	}
	for _, n := range set.Nodes {
		if n.NodeID == node && n.Release.RecordedAt != nil {
			return *n.Release.RecordedAt
		}
	}
	return time.Time{}
}

// startJoiner runs `stratum join --founder A,B` in the background; it
// returns the node's root.
func startJoiner(t *testing.T, a, b *stratumtest.Founder, token, caFile, hostname, ip string) (string, *syncbuf.Buffer, chan error) {
	t.Helper()
	work := t.TempDir()
	cmd := exec.Command(stratumtest.Binary(t), "join", "--founder", a.Join+","+b.Join, "--token", token, "--ca-pin", caPin(t, caFile),
		"--release", "0.1.0", "--state-dir", filepath.Join(work, "state"), "--root", filepath.Join(work, "root"),
		"--hostname", hostname, "--mgmt-ip", ip, "--insecure-store-unseal-key")
	cmd.Env = env()
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return filepath.Join(work, "root"), out, done
}

// approveByHostname approves the pending registration of hostname,
// waiting for it to show.
func approveByHostname(t *testing.T, f *stratumtest.Founder, admin, hostname string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		status, body, err := call(f, "GET", "/v1/admin/join/registrations?state=pending", admin, nil)
		if err != nil || status != 200 {
			continue
		}
		var list struct {
			Registrations []struct {
				JoinID   string `json:"joinId"`
				Hostname string `json:"hostname"`
			} `json:"registrations"`
		}
		if json.Unmarshal(body, &list) != nil {
			continue
		}
		for _, r := range list.Registrations {
			if r.Hostname == hostname {
				if status, body, err := call(f, "POST", "/v1/admin/join/registrations/"+r.JoinID+"/approve", admin, map[string]any{}); err != nil || status != 200 {
					t.Fatalf("approve %s: %d %s %v", hostname, status, body, err)
				}
				return
			}
		}
	}
	t.Fatalf("no pending registration of %s", hostname)
}

func registrationState(t *testing.T, f *stratumtest.Founder, admin, id string) string {
	t.Helper()
	status, body, err := call(f, "GET", "/v1/admin/join/registrations/"+id, admin, nil)
	var v struct{ State string }
	if err != nil || status != 200 || json.Unmarshal(body, &v) != nil {
		return ""
	}
	return v.State
}

// failoverStream writes through every founder until stopped: per founder
// a token writer, and one worker registering (join token on one founder,
// registration through the other's join listener) and approving. Each
// write either is acknowledged (kept, to be read back) or refused; a
// refused one is retried as a new write, as a client would.
type failoverStream struct {
	founders []*stratumtest.Founder
	admin    string
	caFile   string
	t        *testing.T

	mu            sync.Mutex
	tokens        []string
	registrations []string
	approvals     []string
	acked         int
	refused       int
	// events are each founder's token writes: when begun, when ended, ok.
	events [][]writeEvent
	marks  []time.Time

	quit chan struct{}
	wg   sync.WaitGroup
}

type writeEvent struct {
	begun, ended time.Time
	ok           bool
}

func (s *failoverStream) start() {
	s.quit = make(chan struct{})
	s.events = make([][]writeEvent, len(s.founders))
	for i := range s.founders {
		s.wg.Add(1)
		go s.tokenWriter(i)
	}
	s.wg.Add(1)
	go s.joinWorker()
}

func (s *failoverStream) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	s.wg.Wait()
}

func (s *failoverStream) mark(at time.Time) {
	s.mu.Lock()
	s.marks = append(s.marks, at)
	s.mu.Unlock()
}

func (s *failoverStream) counts() (acked, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked, s.refused
}

func (s *failoverStream) result(ok bool) {
	s.mu.Lock()
	if ok {
		s.acked++
	} else {
		s.refused++
	}
	s.mu.Unlock()
}

func (s *failoverStream) pause(ok bool) bool {
	d := 25 * time.Millisecond
	if !ok {
		d = 100 * time.Millisecond
	}
	select {
	case <-s.quit:
		return false
	case <-time.After(d):
		return true
	}
}

func (s *failoverStream) tokenWriter(i int) {
	defer s.wg.Done()
	f := s.founders[i]
	for n := 0; ; n++ {
		begun := time.Now()
		tok, status, err := createToken(f, s.admin, fmt.Sprintf("failover-%d-%d", i, n))
		ok := err == nil && status == 201
		s.mu.Lock()
		s.events[i] = append(s.events[i], writeEvent{begun, time.Now(), ok})
		if ok {
			s.tokens = append(s.tokens, tok.ID)
		}
		s.mu.Unlock()
		s.result(ok)
		if !s.pause(ok) {
			return
		}
	}
}

func (s *failoverStream) joinWorker() {
	defer s.wg.Done()
	for n := 0; ; n++ {
		x, y := s.founders[n%len(s.founders)], s.founders[(n+1)%len(s.founders)]
		// A joiner key of its own: a key asking again gets its own
		// registration back.
		jc := newJoinerClient(s.t, s.caFile)
		ok := s.registerAndApprove(jc, x, y, n)
		jc.c.CloseIdleConnections()
		if !s.pause(ok) {
			return
		}
	}
}

// registerAndApprove is three writes: a join token on x, a registration
// through y, its approval on x.
func (s *failoverStream) registerAndApprove(jc *joinerClient, x, y *stratumtest.Founder, n int) bool {
	status, body, err := call(x, "POST", "/v1/admin/join/tokens", s.admin, map[string]any{"role": "worker", "ttl": "1h", "uses": 1})
	var jt struct {
		Token string `json:"token"`
	}
	if err != nil || status != 201 || json.Unmarshal(body, &jt) != nil {
		s.result(false)
		return false
	}
	s.result(true)
	status, body = jc.try("POST", "https://"+y.Join+"/v1/join/registrations", map[string]any{"token": jt.Token, "release": "0.1.0",
		"hostname": fmt.Sprintf("failover-%d", n), "mgmtIp": fmt.Sprintf("10.77.%d.%d", n/250, n%250+1)})
	var reg struct {
		JoinID string `json:"joinId"`
	}
	if status != 201 || json.Unmarshal(body, &reg) != nil || reg.JoinID == "" {
		s.result(false)
		return false
	}
	s.mu.Lock()
	s.registrations = append(s.registrations, reg.JoinID)
	s.mu.Unlock()
	s.result(true)
	status, _, err = call(x, "POST", "/v1/admin/join/registrations/"+reg.JoinID+"/approve", s.admin, map[string]any{})
	if err != nil || status != 200 {
		s.result(false)
		return false
	}
	s.mu.Lock()
	s.approvals = append(s.approvals, reg.JoinID)
	s.mu.Unlock()
	s.result(true)
	return true
}

// servedAgain waits until founder i acknowledged a write begun after
// done (the fault in place), and answers how long after at (the fault
// begun) that write ended.
func (s *failoverStream) servedAgain(i int, at, done time.Time, within time.Duration) (time.Duration, bool) {
	for deadline := at.Add(within); ; time.Sleep(50 * time.Millisecond) {
		s.mu.Lock()
		for _, e := range s.events[i] {
			if e.ok && e.begun.After(done) {
				s.mu.Unlock()
				return e.ended.Sub(at), true
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			return 0, false
		}
	}
}

// outage is the longest time, over founders, from the first refused write
// begun after at to the next acknowledged one.
func (s *failoverStream) outage(at time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var worst time.Duration
	for _, evs := range s.events {
		var firstRefused time.Time
		for _, e := range evs {
			if e.begun.Before(at) {
				continue
			}
			if !e.ok && firstRefused.IsZero() {
				firstRefused = e.begun
			}
			if e.ok && !firstRefused.IsZero() {
				worst = max(worst, e.ended.Sub(firstRefused))
				break
			}
		}
	}
	return worst
}
