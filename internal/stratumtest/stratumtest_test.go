package stratumtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/wire"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestHarness: a dev founder starts as a child, the admin logs in, the
// typed client answers the error envelope, a signed tree imports, and
// SIGTERM stops the founder cleanly.
func TestHarness(t *testing.T) {
	f := StartFounder(t, FounderOptions{Dev: true})
	if f.API == "" || f.Join == "" || len(f.Pin) < len("sha256:")+64 {
		t.Fatalf("banner: api %q join %q pin %q", f.API, f.Join, f.Pin)
	}
	admin := f.Admin(t)
	if e := admin.Must(t, "GET", "/v1/admin/join/registrations/j-nosuchjoin", nil, 404, nil); e.Code != apierr.NotFound {
		t.Fatalf("unknown registration: %+v", e)
	}
	if e := f.AdminClient().Must(t, "GET", "/v1/admin/releases", nil, 401, nil); e.Code != apierr.Unauthenticated {
		t.Fatalf("no token: %+v", e)
	}
	// The domain verbs: a join token, a joiner with its own key registers
	// (again: the same registration), another key gets 404 on it, the
	// operator approves.
	key := NewJoinerKey(t)
	j := f.Joiner(t, key)
	req := wire.RegisterRequest{Token: admin.JoinToken(t, "worker"), Release: "0.1.0", Hostname: "lab-2", MgmtIP: "192.0.2.12", MachineID: "m-lab-2"}
	v := j.Register(t, req, 201)
	if v.State != wire.StatePending || v.KeyFingerprint != key.Pin {
		t.Fatalf("registration: %+v (key %s)", v, key.Pin)
	}
	if again := j.Register(t, req, 200); again.JoinID != v.JoinID {
		t.Fatalf("the same key registered twice: %s then %s", v.JoinID, again.JoinID)
	}
	if e := f.Joiner(t, nil).Must(t, "GET", "/v1/join/registrations/"+v.JoinID, nil, 404, nil); e.Code != apierr.NotFound {
		t.Fatalf("another key read the registration: %+v", e)
	}
	if ov := admin.Approve(t, v.JoinID, wire.Assignment{}); ov.State != wire.StateApproved && ov.State != wire.StateDelivering {
		t.Fatalf("approved: %+v", ov)
	}

	tree := SignedReleaseTree(t, "0.3.0", []string{"0.1.0"}, 1<<20)
	tree.TrustOn(t, f)
	admin.Must(t, "POST", "/v1/admin/releases", map[string]string{"path": tree.Dir}, 201, nil)
	var list struct{ Releases []struct{ Release string } }
	admin.Must(t, "GET", "/v1/admin/releases", nil, 200, &list)
	if len(list.Releases) != 1 || list.Releases[0].Release != "0.3.0" {
		t.Fatalf("releases %+v", list)
	}
	// What a benchmark reads: the child's CPU time and memory, /metrics.
	if m, err := f.Mem(); err != nil || m.RSS <= 0 || f.CPU() <= 0 {
		t.Fatalf("child's memory %+v (%v), CPU %v", m, err, f.CPU())
	}
	if m, err := f.Metrics(); err != nil || m["go_goroutines"] <= 0 {
		t.Fatalf("metrics: %v, go_goroutines %v", err, m["go_goroutines"])
	}
	if code, took := f.Stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d after %s", code, took)
	}
	if r := Run(t, nil, "version"); r.Code != 0 {
		t.Fatalf("stratum version: %+v", r)
	}
}

// TestInProcessRefused: an in-process founder whose Serve fails before
// listening is Spawn's error, and flags for a child are refused.
func TestInProcessRefused(t *testing.T) {
	broken := errors.New("no listeners today")
	serve := func(ctx context.Context, p InProcess) error { return broken }
	if _, err := Spawn(FounderOptions{Dir: t.TempDir(), Serve: serve}); err == nil || !strings.Contains(err.Error(), broken.Error()) {
		t.Fatalf("a failing Serve: %v", err)
	}
	if _, err := Spawn(FounderOptions{Dir: t.TempDir(), Serve: serve, Args: []string{"--dev"}}); err == nil {
		t.Fatal("an in-process founder took Args")
	}
}
