package releaseset

import (
	"errors"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	membership "stratum/cluster"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

type admissionEnv struct {
	t   *testing.T
	db  *store.DB
	svc *Service
	now time.Time
}

func newAdmissionEnv(t *testing.T, members ...membership.Member) *admissionEnv {
	t.Helper()
	db, _ := storetest.Temp(t)
	e := &admissionEnv{t: t, db: db, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	// The founder holds 0.3.0 and 0.4.0 (imported and verified).
	var err error
	held := func(*store.Tx) ([]string, error) { return []string{"0.4.0", "0.3.0", "0.1.0"}, nil }
	if e.svc, err = New(Config{DB: db, Now: func() time.Time { return e.now }, Node: "n-founder1", Held: held}); err != nil {
		t.Fatal(err)
	}
	cfg := membership.DevDefaults()
	cfg.ClusterRelease = "0.2.0"
	cfg.Founder.NodeID = "n-founder1"
	err = db.Update(func(tx *store.Tx) error {
		if _, _, _, err := membership.Init(tx, cfg, true, e.now); err != nil {
			return err
		}
		for _, m := range members {
			if err := membership.PutMember(tx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *admissionEnv) admission() string {
	e.t.Helper()
	var r string
	if err := e.db.View(func(tx *store.Tx) (err error) { r, err = membership.AdmissionRelease(tx); return err }); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *admissionEnv) record(node, rel string) error {
	return e.svc.Record("node:"+node, node, wire.RecordRequest{RunningRelease: rel})
}

func codeOf(err error) apierr.Code {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func joinedMember(id string) membership.Member {
	return membership.Member{MemberView: wire.MemberView{NodeID: id, State: membership.MemberActive}, JoinID: "j-" + id, Installed: true}
}

// TestAdmissionNeverLoweredByARecord: a record of 0.0.1 changes nothing;
// the admission release rises only once every joined member recently
// reported the newer release, and only to a release the founder holds;
// a delivering member cannot record.
func TestAdmissionNeverLoweredByARecord(t *testing.T) {
	delivering := membership.Member{MemberView: wire.MemberView{NodeID: "n-deliver1", State: membership.MemberJoining}, JoinID: "j-d"}
	e := newAdmissionEnv(t, joinedMember("n-joined01"), joinedMember("n-joined02"), delivering)
	steps := []struct {
		node, rel string
		code      apierr.Code
		advance   time.Duration
		admission string
	}{
		{"n-joined01", "0.0.1", "", 0, "0.2.0"},
		{"n-deliver1", "0.9.0", apierr.Forbidden, 0, "0.2.0"},
		{"n-joined01", "0.3.0", "", 0, "0.2.0"},                // n-joined02 has not agreed
		{"n-joined02", "0.4.0", "", 0, "0.3.0"},                // both at 0.3.0 or newer
		{"n-joined01", "0.4.0", "", 11 * time.Minute, "0.3.0"}, // n-joined02's record is stale
		{"n-joined02", "0.4.0", "", 0, "0.4.0"},
		{"n-joined01", "0.0.1", "", 0, "0.4.0"},
		{"n-unknown1", "0.5.0", apierr.NotFound, 0, "0.4.0"},
		// SPEC 16.6: every joined member reports 99.0.0, a release the
		// founder does not hold: nothing moves.
		{"n-joined01", "99.0.0", "", 0, "0.4.0"},
		{"n-joined02", "99.0.0", "", 0, "0.4.0"},
	}
	for i, s := range steps {
		e.now = e.now.Add(s.advance)
		if got := codeOf(e.record(s.node, s.rel)); got != s.code {
			t.Fatalf("step %d (%s records %s): code %q, want %q", i, s.node, s.rel, got, s.code)
		}
		if got := e.admission(); got != s.admission {
			t.Fatalf("step %d (%s records %s): admission %s, want %s", i, s.node, s.rel, got, s.admission)
		}
	}
}

// TestSetAdmission: lowering needs allowDowngrade; a bad version is
// INVALID_INPUT on release; each change is audited.
func TestSetAdmission(t *testing.T) {
	e := newAdmissionEnv(t)
	if _, err := e.svc.SetAdmission("user:a", wire.SetAdmissionRequest{Release: "0.1.0"}); codeOf(err) != apierr.Conflict || e.admission() != "0.2.0" {
		t.Fatalf("lowering without allowDowngrade: %v, admission %s", err, e.admission())
	}
	var ae *apierr.Error
	if _, err := e.svc.SetAdmission("user:a", wire.SetAdmissionRequest{Release: "latest"}); !errors.As(err, &ae) || ae.Code != apierr.InvalidInput || ae.Fields[0].Field != "release" {
		t.Fatalf("not semver: %v", err)
	}
	if v, err := e.svc.SetAdmission("user:a", wire.SetAdmissionRequest{Release: "0.1.0", AllowDowngrade: true}); err != nil || v.Previous != "0.2.0" || e.admission() != "0.1.0" {
		t.Fatalf("lowering with allowDowngrade: %+v %v", v, err)
	}
	if _, err := e.svc.SetAdmission("user:a", wire.SetAdmissionRequest{Release: "0.5.0"}); err != nil || e.admission() != "0.5.0" {
		t.Fatalf("raising: %v", err)
	}
	events, err := e.db.AuditEvents(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, ev := range events {
		kinds[ev.Kind]++
	}
	if kinds["cluster.release.downgraded"] != 1 || kinds["cluster.release.set"] != 1 {
		t.Fatalf("audit kinds %v", kinds)
	}
}

// TestSetAdmissionMovesTheFounder: the founder runs what it admits
// joiners on, so once the operator sets the admission release its record
// says so at once (its host facts kept): the set shows it on the new
// release, not behind it, and the set's runningRelease is what the nodes
// run. A founder that never recorded gets no record; a joined node's
// record does not move.
func TestSetAdmissionMovesTheFounder(t *testing.T) {
	e := newAdmissionEnv(t, joinedMember("n-a"))
	if _, err := e.svc.SetAdmission("user:admin", wire.SetAdmissionRequest{Release: "0.3.0"}); err != nil {
		t.Fatal(err)
	}
	set, err := e.svc.Describe()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range set.Nodes {
		if n.Recorded {
			t.Errorf("a node that never recorded got a record: %+v", n)
		}
	}

	kernel := &wire.OS{PrettyName: "Debian GNU/Linux 12 (bookworm)", Kernel: "6.1.0-28-amd64"}
	if err := e.svc.Record(FounderActor, "n-founder1", wire.RecordRequest{RunningRelease: "0.3.0", Release: wire.Record{OS: kernel}}); err != nil {
		t.Fatal(err)
	}
	// The joined node reports 0.4.0, which the founder holds: the
	// admission release rises to it, and the founder's record with it.
	e.now = e.now.Add(time.Minute)
	if err := e.record("n-a", "0.4.0"); err != nil {
		t.Fatal(err)
	}
	if got := e.admission(); got != "0.4.0" {
		t.Fatalf("admission release %s after every joined member reported 0.4.0", got)
	}
	if set, err = e.svc.Describe(); err != nil {
		t.Fatal(err)
	}
	var f, a wire.SetNode
	for _, n := range set.Nodes {
		switch n.NodeID {
		case "n-founder1":
			f = n
		case "n-a":
			a = n
		}
	}
	if f.RunningRelease != "0.4.0" || f.Behind || f.Release == nil || f.Release.OS == nil || f.Release.OS.Kernel != kernel.Kernel || !f.Release.RecordedAt.Equal(e.now) {
		t.Errorf("the founder after the admission release moved to 0.4.0: %+v", f)
	}
	if a.RunningRelease != "0.4.0" || a.Behind {
		t.Errorf("the joined node: %+v", a)
	}
	if set.RunningRelease != "0.4.0" || set.Summary.BehindCount != 0 {
		t.Errorf("runningRelease %q, behind %+v", set.RunningRelease, set.Summary.Behind)
	}

	// The operator sets it: the founder follows, the node is behind.
	if _, err := e.svc.SetAdmission("user:admin", wire.SetAdmissionRequest{Release: "0.5.0"}); err != nil {
		t.Fatal(err)
	}
	if set, err = e.svc.Describe(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range set.Summary.Behind {
		names = append(names, b.NodeID+" "+b.RunningRelease)
	}
	if set.RunningRelease != "0.4.0" || strings.Join(names, ",") != "n-a 0.4.0" || set.Summary.Consistent {
		t.Errorf("after the admission release was set to 0.5.0: runningRelease %q, behind %q, consistent %v", set.RunningRelease, names, set.Summary.Consistent)
	}
}
