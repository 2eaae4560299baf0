package founder

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"stratum/internal/stratumtest"
	"stratum/wire"
)

// TestParkedLongPollsHoldNoGoroutine: held long-polls are parked on their
// connection (taken over from net/http), not on net/http's goroutines
// (one small reader a poll watches for its client leaving); they are
// answered with Connection: close and the request id when the state
// changes, and every one still held is answered at shutdown.
func TestParkedLongPollsHoldNoGoroutine(t *testing.T) {
	// In this process: the test counts the founder's goroutines.
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true, Serve: serveIn(nil)})
	op := f.Operator(t)
	const polls = 40
	token := joinToken(t, op, "worker", polls)
	type poller struct {
		j  *stratumtest.Client
		id string
	}
	var ps []poller
	for range polls {
		j := f.Joiner(t, nil)
		v, _ := register(t, j, token, "0.1.0", fmt.Sprintf("192.0.2.%d", 10+len(ps)), 201)
		ps = append(ps, poller{j, v.JoinID})
	}
	// Idle keep-alive connections of the registrations hold goroutines of
	// their own: close them before counting.
	for _, p := range ps {
		p.j.HTTP.CloseIdleConnections()
	}
	time.Sleep(200 * time.Millisecond)
	before := runtime.NumGoroutine()

	type answer struct {
		status int
		state  string
		close  bool
		rid    string
	}
	answers := make(chan answer, polls)
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", p.j.Base+"/v1/join/registrations/"+p.id+"?wait=60&state=pending", nil)
			resp, err := p.j.HTTP.Do(req)
			if err != nil {
				t.Errorf("poll: %v", err)
				return
			}
			defer resp.Body.Close()
			var v wire.JoinerView
			_ = json.NewDecoder(resp.Body).Decode(&v)
			answers <- answer{resp.StatusCode, v.State, resp.Close, resp.Header.Get("X-Request-Id")}
		}()
	}
	// The test's own client goroutines are 2+ per poll (its request and its
	// connection's reader and writer); the founder's must not be.
	deadline := time.Now().Add(10 * time.Second)
	for waiters(t, f) < polls && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := waiters(t, f); n != polls {
		t.Fatalf("%d polls parked, want %d", n, polls)
	}
	time.Sleep(200 * time.Millisecond)
	during := runtime.NumGoroutine()
	// Client side: per poll one Do goroutine plus the transport's read and
	// write loops: 3. The founder's share is one reader a parked poll
	// (watching for its client to leave), not net/http's two.
	if extra := during - before - 3*polls; extra > polls+polls/4 {
		t.Errorf("goroutines rose by %d for %d parked polls: the founder holds %d (want 1 per poll)", during-before, polls, extra)
	}

	// A state change answers its poll at once.
	op.Must(t, "POST", "/v1/admin/join/registrations/"+ps[0].id+"/reject", map[string]any{"reason": "test"}, 200, nil)
	select {
	case a := <-answers:
		if a.status != 200 || a.state != string(wire.StateRejected) || !a.close || len(a.rid) != 16 {
			t.Fatalf("woken poll answered %+v, want 200 rejected with Connection: close and a request id", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the rejection did not answer its parked poll")
	}
	// Shutdown answers every one still parked with its current view.
	f.Stop(os.Interrupt, 20*time.Second)
	wg.Wait()
	close(answers)
	n := 0
	for a := range answers {
		n++
		if a.status != 200 || a.state != string(wire.StatePending) {
			t.Errorf("at shutdown a parked poll answered %+v, want 200 pending", a)
		}
	}
	if n != polls-1 {
		t.Fatalf("%d polls answered at shutdown, want %d", n, polls-1)
	}
}

// waiters reads the founder's stratum_join_waiters gauge.
func waiters(t *testing.T, f *stratumtest.Founder) int {
	t.Helper()
	m, err := f.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	n, ok := m["stratum_join_waiters"]
	if !ok {
		t.Fatal("no stratum_join_waiters in /metrics")
	}
	return int(n)
}
