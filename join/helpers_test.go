package join

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/iam"
	"stratum/store"
	"stratum/store/storetest"
	"stratum/wire"
)

const clusterRelease = "0.6.0"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type offered map[string]bool

func (o offered) Offered(release string) bool { return o[release] }

func (o offered) UpgradesFrom(release string) []string { return nil }

type env struct {
	t     testing.TB
	db    *store.DB
	path  string
	svc   *Service
	clock *clock
	ca    *crypto.CA
	id    cluster.Identity
	sec   cluster.Secrets
	admin iam.Principal
}

type option func(*Config)

// newEnv opens a store in a temp dir with a data key and initializes a
// cluster whose founder binds storage and declares a rack.
func newEnv(t testing.TB, opts ...option) *env {
	t.Helper()
	db, dir := storetest.Temp(t)
	e := &env{t: t, db: db, path: filepath.Join(dir, "stratum.db"), clock: &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, admin: iam.Principal{Subject: "admin@cloud.internal"}}
	dns := []string{"192.0.2.53"}
	cfg := cluster.Config{
		ParentDomain: "stratum.example.com", Region: "lab-1", ClusterRelease: clusterRelease, AdminEmail: "admin@cloud.internal",
		DNSUpstreamServers: &dns,
		Founder: cluster.FounderConfig{NodeID: "n-founder1", MgmtIP: "192.0.2.10",
			Networks: map[string]wire.Network{"storage": {IP: "10.9.0.10", Interface: "vlan90"}},
			Labels:   map[string]string{"topology.rack": "r1"}},
		VIPs: wire.VIPs{API: "192.0.2.240", Postgres: "192.0.2.241", OpenBao: "192.0.2.242"},
	}
	err := db.Update(func(tx *store.Tx) error {
		var err error
		e.id, e.sec, e.ca, err = cluster.Init(tx, cfg, true, e.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := Config{DB: db, Now: e.clock.Now, JoinAddr: "192.0.2.10:9443", CAPin: e.ca.Pin(), Payloads: offered{clusterRelease: true},
		Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&c)
	}
	svc, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	t.Cleanup(e.svc.Close)
	return e
}

func keyPin(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (e *env) token(role string, uses int) string {
	e.t.Helper()
	tok, err := e.svc.CreateToken(e.admin, wire.JoinTokenRequest{Role: role, TTL: "24h", Uses: uses})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.Token
}

func (e *env) register(key, token, release string, selfUpgrade bool) (wire.JoinerView, bool, error) {
	return e.svc.Register(keyPin(key), wire.RegisterRequest{Token: token, Release: release, SelfUpgrade: selfUpgrade,
		Hostname: "lab-" + key, MgmtIP: "192.0.2.99", Facts: []byte(`{"cpus": 4}`)})
}

// pending registers key with a fresh token on the cluster release.
func (e *env) pending(key string) wire.JoinerView {
	e.t.Helper()
	v, created, err := e.register(key, e.token("control-plane", 1), clusterRelease, false)
	if err != nil || !created || v.State != wire.StatePending {
		e.t.Fatalf("register %s: %+v created=%v err=%v", key, v, created, err)
	}
	return v
}

// assignment n is a conflict-free assignment for the n-th joiner.
func assignment(n int) wire.Assignment {
	return wire.Assignment{
		MgmtIP:   "192.0.2." + strconv.Itoa(20+n),
		Networks: map[string]wire.Network{"storage": {IP: "10.9.0." + strconv.Itoa(20+n), Interface: "vlan90"}},
		Labels:   map[string]string{"topology.rack": "r2"},
	}
}

func (e *env) approve(joinID string, a wire.Assignment) wire.OperatorView {
	e.t.Helper()
	v, err := e.svc.Approve(e.admin, joinID, a)
	if err != nil {
		e.t.Fatalf("approve %s: %v", joinID, err)
	}
	return v
}

func (e *env) view(key, joinID string) wire.JoinerView {
	e.t.Helper()
	v, err := e.svc.View(keyPin(key), joinID)
	if err != nil {
		e.t.Fatalf("view %s: %v", joinID, err)
	}
	return v
}

func (e *env) progress(key, joinID, phase string) wire.JoinerView {
	e.t.Helper()
	v, err := e.svc.Progress(keyPin(key), joinID, wire.ProgressRequest{Phase: phase})
	if err != nil {
		e.t.Fatalf("progress %s %s: %v", joinID, phase, err)
	}
	return v
}

func (e *env) member(nodeID string) (cluster.Member, bool) {
	e.t.Helper()
	var m cluster.Member
	var found bool
	err := e.db.View(func(tx *store.Tx) error {
		var err error
		m, found, err = cluster.GetMember(tx, nodeID)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return m, found
}

func (e *env) generation() uint64 {
	var g uint64
	_ = e.db.View(func(tx *store.Tx) error { g = cluster.Generation(tx); return nil })
	return g
}

func (e *env) auditCount() int {
	e.t.Helper()
	n, err := e.db.VerifyAudit()
	if err != nil {
		e.t.Fatalf("audit chain: %v", err)
	}
	return n
}

func wantCode(t *testing.T, err error, code apierr.Code) *apierr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got success", code)
	}
	ae, ok := apierr.As(err)
	if !ok || ae.Code != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	return ae
}

func fieldNames(err error) []string {
	ae, ok := apierr.As(err)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range ae.Fields {
		out = append(out, f.Field)
	}
	return out
}
