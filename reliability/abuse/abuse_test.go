package abuse

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// The founder's server timeouts (founder/serve.go) the slow scenarios
// prove, and the margin a loaded two-CPU runner needs on top of them.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	timeoutMargin     = 4 * time.Second
	concurrency       = 4 // --release-concurrency
	perRegistration   = 2 // release reads one registration holds at once (SPEC 10.8)
	blobSize          = 16 << 20
	clusterRelease    = "0.2.0"
)

// loadSlack is added to every "at once" and "on time" bound of a full run:
// thousands of connections on a two-CPU runner delay the suite's own
// goroutines as much as the founder's.
func loadSlack() time.Duration {
	if full {
		return 6 * time.Second
	}
	return 0
}

// env is what every scenario shares: the one founder and its fixtures.
type env struct {
	f     *stratumtest.Founder
	work  string
	pool  *x509.CertPool
	plain *http.Client // admin API, no certificate
	admin string       // the bootstrap admin's bearer token
	email string
	pass  string

	k1, k2, k3, kp key    // k1 owns r1, k2 owns r2 (both needs-upgrade), k3 owns nothing, kp owns p1 (pending)
	r1, r2, p1     string // join ids
	// kp2 owns p2 and kh owns ph (both pending): a registration holds at
	// most 4 long-polls (SPEC 10.10), so the wait edges spread over p1
	// and p2, and the herd has its own.
	kp2, kh      key
	p2, ph       string
	ka, kb       key // the keys of nodes A (joined) and B (delivering)
	ja, jb       string
	nodeA, nodeB string
	founderNode  string
	leafA, leafB tls.Certificate

	relDir   string            // DATA/releases/0.2.0
	files    map[string][]byte // release path -> bytes
	blob     string            // the large listed file
	victim   string            // a small listed file the symlink scenario replaces
	sysext   string            // the listed sysext image (its directory is swapped for a link)
	manifest []byte

	regsAtStart int          // registrations when the scenarios start
	tokenRegs   atomic.Int64 // registrations the token scenarios created

	mu      sync.Mutex
	results []result
}

type result struct {
	group, name, expect string
	tried, held         int
	took                time.Duration
	notes               []string
}

func (e *env) apiURL(p string) string  { return "https://" + e.f.API + p }
func (e *env) joinURL(p string) string { return "https://" + e.f.Join + p }
func (e *env) bearer() map[string]string {
	return map[string]string{"Authorization": "Bearer " + e.admin}
}

// joiner is a client of the join listener with k's certificate.
func (e *env) joiner(k key) *http.Client {
	return e.client(clientOpts{cert: &k.cert})
}

// scenario is one row of the suite: a name, the answer it expects, and
// the attack, which counts every attempt in its tally.
type scenario struct {
	name   string
	expect string
	run    func(t *testing.T, e *env, c *tally)
	// background: the group starts it and goes on with its next
	// scenarios; the group ends when it ends.
	background bool
}

type group struct {
	name      string
	scenarios []scenario
}

func TestAbuse(t *testing.T) {
	e := setup(t)
	baseline := e.goroutines(t)
	t.Logf("founder ready: admin API %s, join listener %s; baseline go_goroutines %d; %d registrations; full=%v",
		e.f.API, e.f.Join, baseline, e.regsAtStart, full)

	groups := []group{
		{"slow-clients", slowScenarios()},
		{"waits", waitScenarios()},
		{"long-poll-herd", herdScenarios()},
		{"release", releaseScenarios()},
		{"no-cert", noCertScenarios()},
		{"identity", identityScenarios()},
		{"tokens", tokenScenarios()},
		{"login", loginScenarios()},
		{"limits", limitScenarios()},
	}
	start := time.Now()
	// The groups run at once, each on its own goroutine (t.Parallel would
	// cap them at GOMAXPROCS); the scenarios of a group run in order.
	t.Run("scenarios", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(g.name, func(t *testing.T) {
					var bg sync.WaitGroup
					for _, s := range g.scenarios {
						if s.background {
							bg.Add(1)
							go func() {
								defer bg.Done()
								e.runScenario(t, g.name, s)
							}()
							continue
						}
						e.runScenario(t, g.name, s)
					}
					bg.Wait()
				})
			}()
		}
		wg.Wait()
	})
	t.Logf("all scenario groups done in %v", time.Since(start).Round(time.Second))
	for _, s := range aftermath(baseline) {
		e.runScenario(t, "aftermath", s)
	}
	e.summary(t)
}

func (e *env) runScenario(t *testing.T, groupName string, s scenario) {
	t.Run(s.name, func(t *testing.T) {
		c := &tally{t: t}
		start := time.Now()
		s.run(t, e, c)
		took := time.Since(start)
		for _, n := range c.notes {
			t.Logf("  %s", n)
		}
		t.Logf("SUMMARY %s / %s: tried %d, held %d (expect: %s) in %v", groupName, s.name, c.tried, c.held, s.expect, took.Round(time.Millisecond))
		if c.tried == 0 {
			t.Errorf("the scenario tried nothing")
		}
		e.mu.Lock()
		e.results = append(e.results, result{group: groupName, name: s.name, expect: s.expect, tried: c.tried, held: c.held, took: took, notes: c.notes})
		e.mu.Unlock()
	})
}

// summary prints the results as a Markdown table (RESULTS.md is made from it).
func (e *env) summary(t *testing.T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	order := map[string]int{}
	for i, g := range []string{"slow-clients", "waits", "long-poll-herd", "release", "no-cert", "identity", "tokens", "login", "limits", "aftermath"} {
		order[g] = i
	}
	sort.SliceStable(e.results, func(i, j int) bool { return order[e.results[i].group] < order[e.results[j].group] })
	var b strings.Builder
	fmt.Fprintf(&b, "\n| group | scenario | expected answer | tried | held | time |\n|---|---|---|---:|---:|---:|\n")
	tried, held := 0, 0
	for _, r := range e.results {
		mark := ""
		if r.held != r.tried {
			mark = " **FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d%s | %v |\n", r.group, r.name, strings.ReplaceAll(r.expect, "|", "\\|"), r.tried, r.held, mark, r.took.Round(100*time.Millisecond))
		tried += r.tried
		held += r.held
	}
	fmt.Fprintf(&b, "| **total** | %d scenarios | | %d | %d | |\n", len(e.results), tried, held)
	t.Log(b.String())
}

// setup builds the signed release, initializes and starts the founder,
// imports the release, and creates the registrations and nodes the
// scenarios need.
func setup(t *testing.T) *env {
	t.Helper()
	work := t.TempDir()
	e := &env{work: work, files: map[string][]byte{}}
	began := time.Now()
	step := func(what string) { t.Logf("setup: %-40s at %v", what, time.Since(began).Round(time.Millisecond)) }

	// A signed release 0.2.0 that upgrades 0.1.0.
	tree := filepath.Join(work, "tree")
	blob := randomBytes(t, blobSize)
	victim := randomBytes(t, 4096)
	e.blob = "os/blobs/sha256/" + sha256hex(blob)
	e.victim = "os/blobs/sha256/" + sha256hex(victim)
	e.sysext = "sysext/stratum-ovs.raw"
	e.files[e.blob] = blob
	e.files[e.victim] = victim
	e.files[e.sysext] = randomBytes(t, 64<<10)
	for p, b := range e.files {
		writeFile(t, filepath.Join(tree, p), b, 0o644)
	}
	rk := stratumtest.NewReleaseKey(t, filepath.Join(work, "keys"))
	mustRun(t, "release", "sign", "--key", rk.Key, "--release", clusterRelease, "--upgrades-from", "0.1.0", tree)
	step("release signed")

	// The founder: a cluster on 0.2.0 that trusts the key, the tree imported.
	dir := filepath.Join(work, "data")
	cfg := filepath.Join(work, "cluster.yaml")
	writeFile(t, cfg, []byte("parentDomain: stratum.example.com\nregion: lab-1\nclusterRelease: "+clusterRelease+"\ndnsUpstreamServers: []\n"), 0o600)
	mustRun(t, "init", "--data", dir, "--config", cfg)
	step("initialized")
	rk.Trust(t, dir)
	mustRun(t, "release", "import", "--data", dir, tree)
	step("release imported")
	e.relDir = filepath.Join(dir, "releases", clusterRelease)
	var err error
	if e.manifest, err = os.ReadFile(filepath.Join(e.relDir, "payload", "manifest.json")); err != nil {
		t.Fatal(err)
	}

	e.f = stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dir, Args: []string{"--release-concurrency", fmt.Sprint(concurrency)}})
	e.pool = e.f.Pool
	e.plain = e.client(clientOpts{timeout: 30 * time.Second})
	e.email, e.pass = e.f.Credentials(t)
	e.admin = e.f.Operator(t).Token
	step("founder started, admin logged in")

	// Registrations: two needs-upgrade readers, one pending long-poller.
	tok := e.joinToken(t, map[string]any{"role": "control-plane", "uses": 20, "description": "abuse setup"})
	e.k1, e.k2, e.k3, e.kp = newKey(t, "reader-1"), newKey(t, "reader-2"), newKey(t, "stranger"), newKey(t, "poller")
	e.r1 = e.register(t, e.k1, tok, "0.1.0", true, "", "needs-upgrade")
	e.r2 = e.register(t, e.k2, tok, "0.1.0", true, "", "needs-upgrade")
	e.p1 = e.register(t, e.kp, tok, clusterRelease, false, "", "pending")
	e.kp2, e.kh = newKey(t, "poller-2"), newKey(t, "herder")
	e.p2 = e.register(t, e.kp2, tok, clusterRelease, false, "", "pending")
	e.ph = e.register(t, e.kh, tok, clusterRelease, false, "", "pending")

	// Nodes: A joined, B delivering; each one's transport leaf read from
	// its delivery.
	var members struct {
		Members []struct{ NodeID string }
	}
	e.mustJSON(t, do(e.plain, "GET", e.apiURL("/v1/admin/cluster/members"), e.bearer(), nil), 200, &members)
	if len(members.Members) != 1 {
		t.Fatalf("members before the joins: %+v", members)
	}
	e.founderNode = members.Members[0].NodeID
	e.ka, e.kb = newKey(t, "node-a"), newKey(t, "node-b")
	e.ja = e.register(t, e.ka, tok, clusterRelease, false, "192.0.2.21", "pending")
	e.nodeA, e.leafA = e.admit(t, e.ka, e.ja)
	if a := do(e.joiner(e.ka), "POST", e.joinURL("/v1/join/registrations/"+e.ja+"/progress"), nil, map[string]string{"phase": "done"}); !a.is(200, "") {
		t.Fatalf("node A done: %v", a)
	}
	if !waitUntil(20*time.Second, func() bool { return e.joinerState(t, e.ka, e.ja) == "joined" }) {
		t.Fatalf("node A is not joined: %s", e.joinerState(t, e.ka, e.ja))
	}
	e.jb = e.register(t, e.kb, tok, clusterRelease, false, "192.0.2.22", "pending")
	e.nodeB, e.leafB = e.admit(t, e.kb, e.jb)
	step("registrations and nodes ready")

	var regs struct{ Registrations []json.RawMessage }
	e.mustJSON(t, do(e.plain, "GET", e.apiURL("/v1/admin/join/registrations"), e.bearer(), nil), 200, &regs)
	e.regsAtStart = len(regs.Registrations)
	return e
}

// admit approves a pending registration and returns the node id and the
// transport leaf from the delivery the joiner reads.
func (e *env) admit(t *testing.T, k key, joinID string) (string, tls.Certificate) {
	t.Helper()
	var op struct {
		Assignment struct{ NodeID string }
	}
	e.mustJSON(t, do(e.plain, "POST", e.apiURL("/v1/admin/join/registrations/"+joinID+"/approve"), e.bearer(), map[string]any{}), 200, &op)
	var view struct {
		State    string
		Delivery *struct {
			Bundle struct{ NodeCert, NodeKey string }
		}
	}
	if !waitUntil(20*time.Second, func() bool {
		a := do(e.joiner(k), "GET", e.joinURL("/v1/join/registrations/"+joinID), nil, nil)
		return a.is(200, "") && json.Unmarshal(a.body, &view) == nil && view.State == "delivering" && view.Delivery != nil
	}) {
		t.Fatalf("join %s did not reach delivering: %+v", joinID, view)
	}
	leaf, err := tls.X509KeyPair([]byte(view.Delivery.Bundle.NodeCert), []byte(view.Delivery.Bundle.NodeKey))
	if err != nil {
		t.Fatalf("the delivery's leaf: %v", err)
	}
	return op.Assignment.NodeID, leaf
}

func (e *env) joinerState(t *testing.T, k key, joinID string) string {
	t.Helper()
	var v struct{ State string }
	a := do(e.joiner(k), "GET", e.joinURL("/v1/join/registrations/"+joinID), nil, nil)
	if !a.is(200, "") || json.Unmarshal(a.body, &v) != nil {
		return a.String()
	}
	return v.State
}

func (e *env) joinToken(t *testing.T, body map[string]any) string {
	t.Helper()
	var out struct{ Token, TokenID string }
	e.mustJSON(t, do(e.plain, "POST", e.apiURL("/v1/admin/join/tokens"), e.bearer(), body), 201, &out)
	return out.Token
}

// register registers k and checks the state it lands in.
func (e *env) register(t *testing.T, k key, token, release string, selfUpgrade bool, mgmtIP, want string) string {
	t.Helper()
	body := map[string]any{"token": token, "release": release, "selfUpgrade": selfUpgrade, "hostname": k.name}
	if mgmtIP != "" {
		body["mgmtIp"] = mgmtIP
	}
	var v struct {
		JoinID, State string
		Upgrade       *struct{ From, To, Source string }
	}
	e.mustJSON(t, do(e.joiner(k), "POST", e.joinURL("/v1/join/registrations"), nil, body), 201, &v)
	if v.State != want {
		t.Fatalf("registration of %s: state %q, want %q", k.name, v.State, want)
	}
	if want == "needs-upgrade" && (v.Upgrade == nil || v.Upgrade.To != clusterRelease || v.Upgrade.Source != "") {
		t.Fatalf("registration of %s: upgrade %+v, want to %s from the founder itself", k.name, v.Upgrade, clusterRelease)
	}
	return v.JoinID
}

func (e *env) mustJSON(t *testing.T, a answer, status int, out any) {
	t.Helper()
	if !a.is(status, "") {
		t.Fatalf("want %d, got %v", status, a)
	}
	if out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			t.Fatalf("decoding %s: %v", clip(string(a.body), 200), err)
		}
	}
}

// goroutines is the founder's go_goroutines, the least of three reads.
func (e *env) goroutines(t *testing.T) int {
	t.Helper()
	least := -1
	for range 3 {
		g := int(e.metrics(t)["go_goroutines"])
		if least < 0 || g < least {
			least = g
		}
		time.Sleep(200 * time.Millisecond)
	}
	return least
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}

// aftermath: once every scenario is done, the founder is healthy, holds no
// more goroutines than at the start (give or take), changed no state for
// any refused request, and exits 0 on SIGTERM.
func aftermath(baseline int) []scenario {
	return []scenario{
		{name: "healthz on both listeners", expect: "200 {status: ok}", run: func(t *testing.T, e *env, c *tally) {
			a := do(e.plain, "GET", e.apiURL("/healthz"), nil, nil)
			c.check(a.is(200, "") && strings.Contains(string(a.body), "ok"), "admin /healthz: %v", a)
			a = do(e.joiner(e.k3), "GET", e.joinURL("/healthz"), nil, nil)
			c.check(a.is(200, "") && strings.Contains(string(a.body), "ok"), "join /healthz: %v", a)
		}},
		{name: "goroutines back near baseline", expect: fmt.Sprintf("go_goroutines <= baseline %d + 15 within 30 s; no release read in flight, no waiter", baseline), run: func(t *testing.T, e *env, c *tally) {
			var g int
			var m map[string]float64
			ok := waitUntil(30*time.Second, func() bool {
				m = e.metrics(t)
				g = int(m["go_goroutines"])
				return g <= baseline+15 && m["stratum_release_reads_in_flight"] == 0 && m["stratum_join_waiters"] == 0
			})
			c.note("go_goroutines %d (baseline %d), release reads in flight %v, join waiters %v", g, baseline, m["stratum_release_reads_in_flight"], m["stratum_join_waiters"])
			c.check(ok, "go_goroutines %d (baseline %d), in flight %v, waiters %v", g, baseline, m["stratum_release_reads_in_flight"], m["stratum_join_waiters"])
		}},
		{name: "refused requests changed no state", expect: "registrations = before + those the token scenarios created; r1 still needs-upgrade, B still delivering", run: func(t *testing.T, e *env, c *tally) {
			var regs struct{ Registrations []json.RawMessage }
			e.mustJSON(t, do(e.plain, "GET", e.apiURL("/v1/admin/join/registrations"), e.bearer(), nil), 200, &regs)
			want := e.regsAtStart + int(e.tokenRegs.Load())
			c.check(len(regs.Registrations) == want, "%d registrations, want %d (%d at start + %d from token scenarios)", len(regs.Registrations), want, e.regsAtStart, e.tokenRegs.Load())
			c.check(e.joinerState(t, e.k1, e.r1) == "needs-upgrade", "r1 is %s", e.joinerState(t, e.k1, e.r1))
			c.check(e.joinerState(t, e.kb, e.jb) == "delivering", "B is %s", e.joinerState(t, e.kb, e.jb))
		}},
		{name: "no panic logged", expect: "the founder's output holds no panic and no INTERNAL error", run: func(t *testing.T, e *env, c *tally) {
			out := e.f.Output()
			c.check(!strings.Contains(out, "panic"), "the founder logged a panic:\n%s", tail(out, 4096))
			c.check(!strings.Contains(out, "internal error"), "the founder logged an internal error:\n%s", grepLines(out, "internal error", 10))
		}},
		{name: "SIGTERM", expect: "exit 0 within 15 s", run: func(t *testing.T, e *env, c *tally) {
			code, took := e.f.Stop(syscall.SIGTERM, 20*time.Second)
			c.note("exit %d after %v", code, took.Round(time.Millisecond))
			c.check(code == 0 && took < 15*time.Second, "SIGTERM: exit %d after %v", code, took)
		}},
	}
}

func grepLines(s, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
