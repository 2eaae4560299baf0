package soak

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"stratum/internal/stratumtest"
	"stratum/release"
)

// Rates of the steady traffic. The same per-minute mix runs in the short
// and the long soak, so the 2-minute run is a faithful sample of the long
// one; only its length differs.
const (
	spawnEvery      = 2500 * time.Millisecond // a new joiner (join token + registration)
	maxLiveJoiners  = 10                      // bounds long-polls and connections
	upgraderPercent = 30                      // joiners on the older release with selfUpgrade
	operatorEvery   = 2 * time.Second         // list pending, approve / reject / race
	releaseSetEvery = 4 * time.Second         // GET the release set
	recordEvery     = 6 * time.Second         // PUT a node's release record
	auditEvery      = 5 * time.Second         // read the audit tail
	drainLimit      = 2 * time.Minute         // joiners left when traffic stops must finish within this
)

// soak is one run's shared state.
type soak struct {
	f        *stratumtest.Founder
	tally    *tally
	admin    *http.Client
	adminTok string // the bootstrap admin's session
	recTok   string // an API token allowed upgrade:RecordRelease and upgrade:DescribeRelease only
	founder  string // the founder's node id
	keyring  *release.Keyring
	hard     context.Context // ends every request when the drain overruns

	draining atomic.Bool
	ipSeq    atomic.Int64
	joinerID atomic.Int64

	mu     sync.Mutex
	live   map[string]*joiner // joinId -> live joiner, for other-key probes
	agents []*agent           // joined nodes that report applied generations
	ends   map[string]int     // how joiners ended

	nLive atomic.Int64
}

// agent is a joined node: it holds its transport leaf and reports the
// membership generations it applies, as a real node does.
type agent struct {
	nodeID string
	client *http.Client
}

// agentCap bounds the joined nodes: membership only grows (no endpoint
// removes an active member), and every join has each member report its
// generation, so an unbounded membership would make the traffic itself
// grow. Two at the start, one more every two minutes, at most 12.
func (s *soak) agentCap(elapsed time.Duration) int {
	return min(12, 2+int(elapsed/(2*time.Minute)))
}

// call is one request and the answers it may get.
type call struct {
	op      string
	client  *http.Client
	method  string
	url     string
	bearer  string
	body    any
	header  map[string]string
	expect  []int
	busyOK  bool // 503 RELEASE_BUSY is an expected answer
	out     any  // decoded from a 2xx JSON answer
	timeout time.Duration
	// readRate, when set, reads the body at about this many bytes a
	// second: a joiner on a slow link holds its release slot longer.
	readRate int
}

// do sends c, counts its answer and reports whether it was expected; a
// transport error or unexpected status is recorded once, here.
func (s *soak) do(c call) (int, []byte, http.Header, bool) {
	var rd io.Reader
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx := s.hard
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, rd)
	if err != nil {
		panic(err)
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if s.hard.Err() == nil {
			s.tally.add(c.op, 0)
			s.tally.transportErr(c.op, err)
		}
		return 0, nil, nil, false
	}
	defer resp.Body.Close()
	raw, err := readBody(resp.Body, c.readRate)
	if err != nil {
		if s.hard.Err() == nil {
			s.tally.add(c.op, 0)
			s.tally.transportErr(c.op, fmt.Errorf("reading the %d answer: %w", resp.StatusCode, err))
		}
		return 0, nil, nil, false
	}
	s.tally.add(c.op, resp.StatusCode)
	ok := slices.Contains(c.expect, resp.StatusCode)
	if !ok && c.busyOK && resp.StatusCode == http.StatusServiceUnavailable && errorCode(raw) == "RELEASE_BUSY" {
		ok = true
	}
	if !ok {
		s.tally.badStatus(c.op, resp.StatusCode, c.method+" "+c.url+": "+string(raw))
		return resp.StatusCode, raw, resp.Header, false
	}
	if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode/100 == 2 && c.out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, c.out); err != nil {
			s.tally.checkFailed("%s: answer is not the JSON expected: %v: %s", c.op, err, clip(string(raw), 200))
			return resp.StatusCode, raw, resp.Header, false
		}
	}
	return resp.StatusCode, raw, resp.Header, true
}

// readBody reads r whole, at about rate bytes a second when rate > 0.
func readBody(r io.Reader, rate int) ([]byte, error) {
	if rate <= 0 {
		return io.ReadAll(r)
	}
	var out bytes.Buffer
	piece := max(rate/20, 4096) // 20 pieces a second
	for {
		n, err := io.CopyN(&out, r, int64(piece))
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
		if n == int64(piece) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func errorCode(raw []byte) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Code
}

func (s *soak) adminURL(path string) string { return "https://" + s.f.API + path }
func (s *soak) joinURL(path string) string  { return "https://" + s.f.Join + path }

// every runs fn at a steady pace until stop is closed.
func every(stop <-chan struct{}, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// ---- joiners ----

type view struct {
	JoinID        string `json:"joinId"`
	State         string `json:"state"`
	Reason        string `json:"reason"`
	Release       string `json:"release"`
	QueuePosition int    `json:"queuePosition"`
	Upgrade       *struct {
		From, To, Source string
	} `json:"upgrade"`
	Delivery *struct {
		NodeYAML string `json:"nodeYaml"`
		Bundle   struct {
			NodeCert   string `json:"nodeCert"`
			NodeKey    string `json:"nodeKey"`
			CABundle   string `json:"caBundle"`
			Generation uint64 `json:"generation"`
			Nodes      []struct {
				NodeID string `json:"nodeId"`
			} `json:"nodes"`
		} `json:"bundle"`
	} `json:"delivery"`
}

// joiner is one simulated `stratum join`: its own ed25519 key, its own
// connections, one registration from token to a final state.
type joiner struct {
	s        *soak
	n        int64
	client   *http.Client
	joinID   string
	upgrader bool
	fetchers int // parallel ranged reads while upgrading
	mgmtIP   string
}

func (s *soak) newJoiner() (*joiner, error) {
	key, err := stratumtest.MakeJoinerKey()
	if err != nil {
		return nil, err
	}
	n := s.joinerID.Add(1)
	ip := s.ipSeq.Add(1)
	return &joiner{
		s: s, n: n,
		// Three joiners in ten are upgraders. Most fetch two ranges at a
		// time; one in ten fetches six large ones at a time, more than the
		// founder's four slots: RELEASE_BUSY, Retry-After, retry.
		upgrader: n%10 < upgraderPercent/10,
		fetchers: map[bool]int{true: 6, false: 2}[n%10 == 1],
		mgmtIP:   fmt.Sprintf("10.%d.%d.%d", 64+ip/62500, (ip/250)%250, ip%250+1),
		client: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{
			// A small receive buffer: the founder's writes wait on the
			// joiner's reads, so a slow reader holds its release slot as on
			// a real link (on loopback the kernel would buffer a whole range).
			DialContext:         smallRcvBuf.DialContext,
			TLSClientConfig:     &tls.Config{RootCAs: s.f.Pool, Certificates: []tls.Certificate{key.Cert}},
			MaxIdleConnsPerHost: 4, IdleConnTimeout: clientIdle,
		}},
	}, nil
}

var smallRcvBuf = &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<10) }); err != nil {
		return err
	}
	return serr
}}

var roles = []string{"control-plane", "worker", "postgres"}

// run takes the joiner from a fresh token to a final state.
func (j *joiner) run() {
	s := j.s
	defer j.client.CloseIdleConnections()
	defer s.nLive.Add(-1)
	end := "aborted"
	defer func() {
		s.mu.Lock()
		delete(s.live, j.joinID)
		s.ends[end]++
		s.mu.Unlock()
	}()

	var tok struct {
		Token string `json:"token"`
	}
	role := roles[j.n%int64(len(roles))]
	if _, _, _, ok := s.do(call{op: "admin token create", client: s.admin, method: "POST", url: s.adminURL("/v1/admin/join/tokens"), bearer: s.adminTok,
		body: map[string]any{"role": role, "ttl": "1h", "uses": 1, "description": "soak"}, expect: []int{201}, out: &tok}); !ok {
		return
	}
	rel := clusterRelease
	if j.upgrader {
		rel = olderRelease
	}
	reg := map[string]any{"token": tok.Token, "release": rel, "selfUpgrade": j.upgrader, "hostname": fmt.Sprintf("soak-%d", j.n),
		"mgmtIp": j.mgmtIP, "machineId": fmt.Sprintf("soak-machine-%08d", j.n), "facts": map[string]any{"soak": j.n, "cpus": 4}}
	var v view
	if _, _, _, ok := s.do(call{op: "join register", client: j.client, method: "POST", url: s.joinURL("/v1/join/registrations"), body: reg, expect: []int{201}, out: &v}); !ok {
		return
	}
	j.joinID = v.JoinID
	want := "pending"
	if j.upgrader {
		want = "needs-upgrade"
	}
	if v.State != want {
		s.tally.checkFailed("joiner %d on %s registered as %s, want %s", j.n, rel, v.State, want)
		return
	}
	s.mu.Lock()
	s.live[j.joinID] = j
	s.mu.Unlock()

	if j.upgrader {
		if v.Upgrade == nil || v.Upgrade.To != clusterRelease || v.Upgrade.Source != "" {
			s.tally.checkFailed("joiner %d: needs-upgrade without the founder's upgrade: %+v", j.n, v.Upgrade)
			return
		}
		if !j.download() {
			return
		}
		// Upgraded: register again with the same key on the cluster's release.
		reg["release"] = clusterRelease
		if _, _, _, ok := s.do(call{op: "join re-register", client: j.client, method: "POST", url: s.joinURL("/v1/join/registrations"), body: reg, expect: []int{200}, out: &v}); !ok {
			return
		}
		if v.State != "pending" || v.JoinID != j.joinID {
			s.tally.checkFailed("joiner %d: re-registration answered %s %s, want pending %s", j.n, v.JoinID, v.State, j.joinID)
			return
		}
	}
	if mrand.IntN(3) == 0 {
		j.probeOther()
	}

	// Long-poll until the operator decides and the turn comes.
	for !final(v.State) && v.State != "delivering" {
		if s.hard.Err() != nil {
			return
		}
		wait := 5 + mrand.IntN(16)
		url := s.joinURL(fmt.Sprintf("/v1/join/registrations/%s?wait=%d&state=%s", j.joinID, wait, v.State))
		if _, _, _, ok := s.do(call{op: "join long-poll", client: j.client, method: "GET", url: url, expect: []int{200}, out: &v}); !ok {
			return
		}
	}
	switch v.State {
	case "rejected":
		end = "rejected"
		return
	case "delivering":
	default:
		s.tally.checkFailed("joiner %d: long-poll ended in %s (%s) before its turn", j.n, v.State, v.Reason)
		return
	}
	end = j.turn(v)
}

func final(state string) bool {
	return state == "joined" || state == "rejected" || state == "failed"
}

// turn plays the delivery: the outcome is drawn so that joins, operator
// cancels and joiner failures all happen, and the queue always moves.
func (j *joiner) turn(v view) string {
	s := j.s
	d := v.Delivery
	if d == nil || d.Bundle.NodeCert == "" || d.Bundle.NodeKey == "" || d.Bundle.Generation == 0 || d.NodeYAML == "" {
		s.tally.checkFailed("joiner %d: delivering without a complete delivery", j.n)
		return "bad delivery"
	}
	g := d.Bundle.Generation
	progress := func(phase string, wantState string) bool {
		var pv view
		_, _, _, ok := s.do(call{op: "join progress " + phase, client: j.client, method: "POST", url: s.joinURL("/v1/join/registrations/" + j.joinID + "/progress"),
			body: map[string]string{"phase": phase, "message": "soak"}, expect: []int{200}, out: &pv})
		if ok && pv.State != wantState {
			s.tally.checkFailed("joiner %d: progress %s answered %s, want %s", j.n, phase, pv.State, wantState)
			return false
		}
		return ok
	}
	// The peers that must apply this node's generation are the other
	// members the bundle lists, as on a real node. A peer that joined in
	// the very commit that gave this join its turn may not have announced
	// itself yet: wait for it rather than take a stale list.
	me := stratumtest.NodeIDOf(d.NodeYAML)
	var agents []*agent
	for _, nd := range d.Bundle.Nodes {
		if nd.NodeID == me || nd.NodeID == s.founder {
			continue
		}
		a := s.agentFor(nd.NodeID)
		if a == nil {
			s.tally.checkFailed("joiner %d: bundle lists member %s that is no joined node of this soak", j.n, nd.NodeID)
			return "error"
		}
		agents = append(agents, a)
	}
	canJoin := len(agents) < s.agentCap(time.Since(soakStart))

	roll := mrand.IntN(100)
	switch {
	case canJoin && roll < 60:
		cert, err := tls.X509KeyPair([]byte(d.Bundle.NodeCert), []byte(d.Bundle.NodeKey))
		if err != nil {
			s.tally.checkFailed("joiner %d: delivered leaf does not load: %v", j.n, err)
			return "bad delivery"
		}
		self := &agent{nodeID: me, client: adminClient(s.f, &cert)}
		if !progress("installing", "installing") {
			return "error"
		}
		if mrand.IntN(5) == 0 && !progress("installing", "installing") { // a repeated report after a lost answer
			return "error"
		}
		want := "installing"
		if len(agents) == 0 {
			want = "joined" // the founder applies at once; nobody else has to
		}
		if !progress("done", want) {
			return "error"
		}
		// Every other member applies the generation this node was admitted at.
		for _, a := range agents {
			if _, _, _, ok := s.do(call{op: "node applied", client: a.client, method: "PUT", url: s.adminURL("/v1/cluster/members/" + a.nodeID + "/applied"),
				body: map[string]uint64{"generation": g}, expect: []int{200}}); !ok {
				return "error"
			}
		}
		if want == "installing" {
			if !j.pollUntilNot("installing", &v) {
				return "error"
			}
		} else {
			v.State = want
		}
		if v.State != "joined" {
			s.tally.checkFailed("joiner %d: every member applied generation %d but the join is %s (%s)", j.n, g, v.State, v.Reason)
			return "error"
		}
		s.mu.Lock()
		s.agents = append(s.agents, self)
		s.mu.Unlock()
		return "joined"
	case roll < 85:
		if !progress("installing", "installing") {
			return "error"
		}
		// With another member that has not applied g, done leaves the join
		// installing; with none it would be joined at once and not be
		// cancellable.
		if len(agents) > 0 && mrand.IntN(2) == 0 && !progress("done", "installing") {
			return "error"
		}
		var ov struct {
			State string `json:"state"`
		}
		if _, _, _, ok := s.do(call{op: "admin cancel", client: s.admin, method: "POST", url: s.adminURL("/v1/admin/join/registrations/" + j.joinID + "/cancel"), bearer: s.adminTok,
			body: map[string]string{"reason": "soak: cancelled by the operator"}, expect: []int{200}, out: &ov}); !ok {
			return "error"
		}
		if !j.pollUntilNot("installing", &v) {
			return "error"
		}
		if ov.State != "failed" || v.State != "failed" {
			s.tally.checkFailed("joiner %d: cancelled join is %s / %s, want failed", j.n, ov.State, v.State)
		}
		return "cancelled"
	default:
		if !progress("installing", "installing") || !progress("failed", "failed") {
			return "error"
		}
		return "failed"
	}
}

// agentFor is the joined node nodeID, waiting a little for one that has
// just joined to announce itself.
func (s *soak) agentFor(nodeID string) *agent {
	deadline := time.Now().Add(15 * time.Second)
	for {
		s.mu.Lock()
		for _, a := range s.agents {
			if a.nodeID == nodeID {
				s.mu.Unlock()
				return a
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) || s.hard.Err() != nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pollUntilNot long-polls while the state is state.
func (j *joiner) pollUntilNot(state string, v *view) bool {
	v.State = state
	for v.State == state {
		if j.s.hard.Err() != nil {
			return false
		}
		url := j.s.joinURL(fmt.Sprintf("/v1/join/registrations/%s?wait=%d&state=%s", j.joinID, 5+mrand.IntN(16), state))
		if _, _, _, ok := j.s.do(call{op: "join long-poll", client: j.client, method: "GET", url: url, expect: []int{200}, out: v}); !ok {
			return false
		}
	}
	return true
}

// probeOther asks for another live joiner's registration and release with
// this joiner's key: 404, exactly as for an unknown id.
func (j *joiner) probeOther() {
	s := j.s
	s.mu.Lock()
	var other string
	for id := range s.live {
		if id != j.joinID {
			other = id
			break
		}
	}
	s.mu.Unlock()
	if other == "" {
		return
	}
	s.do(call{op: "probe other key", client: j.client, method: "GET", url: s.joinURL("/v1/join/registrations/" + other), expect: []int{404}})
	s.do(call{op: "probe other key release", client: j.client, method: "GET", url: s.joinURL("/v1/join/registrations/" + other + "/release/payload/manifest.json"), expect: []int{404}})
}

// download fetches the offered release as `stratum join` does: the
// manifest and its signature, checked against the release key, then every
// file in ranged reads (two at a time, resuming with If-Range), retrying
// after Retry-After on RELEASE_BUSY; every file's SHA-256 is checked.
func (j *joiner) download() bool {
	s := j.s
	base := s.joinURL("/v1/join/registrations/" + j.joinID + "/release/")
	manifest, ok := j.fetchWhole(base + "payload/manifest.json")
	if !ok {
		return false
	}
	sig, ok := j.fetchWhole(base + "payload/manifest.sig")
	if !ok {
		return false
	}
	m, err := s.keyring.VerifyManifest(manifest, sig)
	if err != nil {
		s.tally.checkFailed("joiner %d: the served manifest does not verify: %v", j.n, err)
		return false
	}
	if len(m.Files) == 0 {
		s.tally.checkFailed("joiner %d: the served manifest lists no file", j.n)
		return false
	}
	head := m.Files[mrand.IntN(len(m.Files))]
	if _, _, h, ok := s.do(call{op: "release HEAD", client: j.client, method: "HEAD", url: base + head.Path, expect: []int{200}}); ok && h.Get("Content-Length") != strconv.FormatInt(head.Size, 10) {
		s.tally.checkFailed("joiner %d: HEAD %s Content-Length %s, want %d", j.n, head.Path, h.Get("Content-Length"), head.Size)
	}
	return j.fetchFiles(base, m.Files)
}

// fetchWhole GETs a small file whole, retrying on RELEASE_BUSY.
func (j *joiner) fetchWhole(url string) ([]byte, bool) {
	for attempt := 0; attempt < 30; attempt++ {
		status, body, h, ok := j.s.do(call{op: "release GET whole", client: j.client, method: "GET", url: url, expect: []int{200}, busyOK: true})
		if !ok {
			return nil, false
		}
		if status == http.StatusOK {
			return body, true
		}
		j.backoff(h)
	}
	j.s.tally.checkFailed("joiner %d: %s stayed RELEASE_BUSY for 30 attempts", j.n, url)
	return nil, false
}

func (j *joiner) backoff(h http.Header) {
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 5 {
		j.s.tally.checkFailed("joiner %d: RELEASE_BUSY with Retry-After %q, want 1..5", j.n, h.Get("Retry-After"))
		secs = 1
	}
	time.Sleep(time.Duration(secs) * time.Second)
}

// fetchFiles assembles every file from ranged reads, j.fetchers at a
// time across all the files: ranges of 192 KiB to 1.5 MiB read at 4 MiB/s;
// an impatient joiner sends waves of six ranges of 1 to 1.5 MiB at once,
// more than the founder's four slots: the last ones of a wave are
// answered RELEASE_BUSY and retried after Retry-After.
func (j *joiner) fetchFiles(base string, files []release.File) bool {
	type target struct {
		path string
		buf  []byte
		etag atomic.Value
		sum  string
	}
	type part struct {
		t          *target
		start, end int64 // inclusive end
	}
	var parts []part
	var targets []*target
	for _, f := range files {
		t := &target{path: f.Path, buf: make([]byte, f.Size), sum: f.SHA256}
		targets = append(targets, t)
		for off := int64(0); off < f.Size; {
			n := int64(192<<10 + mrand.IntN(1<<20+128<<10))
			if j.fetchers > 2 {
				n = int64(1<<20 + mrand.IntN(512<<10))
			}
			end := min(off+n, f.Size) - 1
			parts = append(parts, part{t, off, end})
			off = end + 1
		}
	}
	var failed atomic.Bool
	fetch := func(p part) {
		if !failed.Load() && !j.fetchPart(base+p.t.path, p.t.path, p.start, p.end, p.t.buf, &p.t.etag) {
			failed.Store(true)
		}
	}
	var wg sync.WaitGroup
	if j.fetchers > 2 {
		// Warm one connection per fetcher (HEAD takes no slot), then send
		// each wave of ranges at the same instant, as a download manager
		// does: more requests than slots arrive together.
		for range j.fetchers {
			wg.Go(func() {
				s := j.s
				s.do(call{op: "release HEAD", client: j.client, method: "HEAD", url: base + files[0].Path, expect: []int{200}})
			})
		}
		wg.Wait()
		for len(parts) > 0 {
			wave := parts[:min(j.fetchers, len(parts))]
			parts = parts[len(wave):]
			start := make(chan struct{})
			for _, p := range wave {
				wg.Go(func() { <-start; fetch(p) })
			}
			close(start)
			wg.Wait()
		}
	} else {
		next := make(chan part)
		for range j.fetchers {
			wg.Go(func() {
				for p := range next {
					fetch(p)
				}
			})
		}
		for _, p := range parts {
			next <- p
		}
		close(next)
		wg.Wait()
	}
	if failed.Load() {
		return false
	}
	for _, t := range targets {
		got := sha256.Sum256(t.buf)
		if hex.EncodeToString(got[:]) != t.sum {
			j.s.tally.checkFailed("joiner %d: %s assembled from ranges has sha256 %x, manifest says %s", j.n, t.path, got, t.sum)
			return false
		}
	}
	return true
}

func (j *joiner) fetchPart(url, path string, start, end int64, buf []byte, etag *atomic.Value) bool {
	rate := 4 << 20
	for attempt := 0; attempt < 30; attempt++ {
		hdr := map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", start, end)}
		if e, _ := etag.Load().(string); e != "" {
			hdr["If-Range"] = e
		}
		status, body, h, ok := j.s.do(call{op: "release GET range", client: j.client, method: "GET", url: url, header: hdr, expect: []int{206}, busyOK: true, readRate: rate})
		if !ok {
			return false
		}
		if status == http.StatusServiceUnavailable {
			j.backoff(h)
			continue
		}
		want := fmt.Sprintf("bytes %d-%d/%d", start, end, len(buf))
		if h.Get("Content-Range") != want || int64(len(body)) != end-start+1 {
			j.s.tally.checkFailed("joiner %d: %s range %d-%d answered Content-Range %q with %d bytes", j.n, path, start, end, h.Get("Content-Range"), len(body))
			return false
		}
		etag.CompareAndSwap(nil, h.Get("ETag"))
		copy(buf[start:], body)
		return true
	}
	j.s.tally.checkFailed("joiner %d: %s stayed RELEASE_BUSY for 30 attempts", j.n, path)
	return false
}

// ---- the operator ----

type operator struct {
	s    *soak
	due  map[string]time.Time // pending joinId -> when the operator decides
	tick int
}

type opView struct {
	JoinID string `json:"joinId"`
	State  string `json:"state"`
}

// step lists pending registrations and decides the ones that are due:
// most are approved, some rejected, and a few get two decisions at once
// (a deliberate race: exactly one wins, the other is 409).
func (o *operator) step() {
	s := o.s
	o.tick++
	var list struct {
		Registrations []opView `json:"registrations"`
	}
	if _, _, _, ok := s.do(call{op: "admin list pending", client: s.admin, method: "GET", url: s.adminURL("/v1/admin/join/registrations?state=pending"), bearer: s.adminTok, expect: []int{200}, out: &list}); !ok {
		return
	}
	now := time.Now()
	seen := map[string]bool{}
	for _, r := range list.Registrations {
		seen[r.JoinID] = true
		at, ok := o.due[r.JoinID]
		if !ok {
			// Let the joiner's long-polls hold (and time out) a while.
			at = now.Add(3*time.Second + time.Duration(mrand.IntN(10_000))*time.Millisecond)
			o.due[r.JoinID] = at
		}
		if now.Before(at) && !s.draining.Load() {
			continue
		}
		delete(o.due, r.JoinID)
		o.decide(r.JoinID)
	}
	for id := range o.due {
		if !seen[id] {
			delete(o.due, id)
		}
	}
	if o.tick%5 == 0 && len(list.Registrations) > 0 {
		id := list.Registrations[mrand.IntN(len(list.Registrations))].JoinID
		s.do(call{op: "admin get registration", client: s.admin, method: "GET", url: s.adminURL("/v1/admin/join/registrations/" + id), bearer: s.adminTok, expect: []int{200}})
	}
	if o.tick%5 == 1 {
		s.do(call{op: "admin members", client: s.admin, method: "GET", url: s.adminURL("/v1/admin/cluster/members"), bearer: s.adminTok, expect: []int{200}})
	}
	if o.tick%8 == 2 {
		s.do(call{op: "admin token list", client: s.admin, method: "GET", url: s.adminURL("/v1/admin/join/tokens"), bearer: s.adminTok, expect: []int{200}})
		// A token made and revoked unused.
		var tok struct {
			TokenID string `json:"tokenId"`
		}
		if _, _, _, ok := s.do(call{op: "admin token create", client: s.admin, method: "POST", url: s.adminURL("/v1/admin/join/tokens"), bearer: s.adminTok,
			body: map[string]any{"role": "worker", "ttl": "10m", "uses": 1}, expect: []int{201}, out: &tok}); ok {
			s.do(call{op: "admin token revoke", client: s.admin, method: "DELETE", url: s.adminURL("/v1/admin/join/tokens/" + tok.TokenID), bearer: s.adminTok, expect: []int{204}})
		}
	}
}

func (o *operator) decide(id string) {
	s := o.s
	approve := call{op: "admin approve", client: s.admin, method: "POST", url: s.adminURL("/v1/admin/join/registrations/" + id + "/approve"), bearer: s.adminTok, body: map[string]any{}, expect: []int{200}}
	reject := call{op: "admin reject", client: s.admin, method: "POST", url: s.adminURL("/v1/admin/join/registrations/" + id + "/reject"), bearer: s.adminTok,
		body: map[string]string{"reason": "soak: rejected by the operator"}, expect: []int{200}}
	roll := mrand.IntN(100)
	if s.draining.Load() {
		roll = 99
	}
	switch {
	case roll < 8:
		s.do(reject)
	case roll < 16:
		// Two operators at once: approve+approve or approve+reject.
		a, b := approve, approve
		if roll < 12 {
			b = reject
		}
		a.op, b.op = "race "+a.op, "race "+b.op
		a.expect, b.expect = []int{200, 409}, []int{200, 409}
		var wg sync.WaitGroup
		var statuses [2]int
		for i, c := range []call{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], _, _, _ = s.do(c)
			}()
		}
		wg.Wait()
		// Two approvals: exactly one wins. Approve and reject: a reject
		// right after the approval is still allowed while the join waits
		// in the queue, so both may win; never neither.
		wins := 0
		for _, st := range statuses {
			if st == 200 {
				wins++
			}
		}
		if statuses[0] != 0 && statuses[1] != 0 && (wins == 0 || (b.op == a.op && wins != 1)) {
			s.tally.checkFailed("race %s/%s on %s answered %d/%d", a.op, b.op, id, statuses[0], statuses[1])
		}
	default:
		s.do(approve)
	}
}

// ---- release set and audit ----

// readReleaseSet reads the release set in each encoding a client may ask
// for; the cluster's running release must not move.
func (s *soak) readReleaseSet(n int) {
	enc := []string{"", "gzip", "zstd"}[n%3]
	hdr := map[string]string{}
	if enc != "" {
		hdr["Accept-Encoding"] = enc
	}
	_, body, h, ok := s.do(call{op: "releaseset GET", client: s.admin, method: "GET", url: s.adminURL("/v1/admin/upgrades/release"), bearer: s.recTok, header: hdr, expect: []int{200}})
	if !ok {
		return
	}
	switch h.Get("Content-Encoding") {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			body, err = io.ReadAll(zr)
		}
		if err != nil {
			s.tally.checkFailed("release set gzip body: %v", err)
			return
		}
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err == nil {
			body, err = io.ReadAll(zr)
			zr.Close()
		}
		if err != nil {
			s.tally.checkFailed("release set zstd body: %v", err)
			return
		}
	}
	var set struct {
		Node           string `json:"node"`
		RunningRelease string `json:"runningRelease"`
		Nodes          []struct {
			NodeID string `json:"nodeId"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		s.tally.checkFailed("release set (%s) is not JSON: %v", enc, err)
		return
	}
	if set.RunningRelease != clusterRelease || set.Node != s.founder || len(set.Nodes) == 0 {
		s.tally.checkFailed("release set: node %q runningRelease %q with %d nodes", set.Node, set.RunningRelease, len(set.Nodes))
	}
}

// recordRelease records a node's release: the founder's or a joined
// node's, with the recorder token or the node's own leaf.
func (s *soak) recordRelease(n int) {
	now := time.Now().UTC()
	body := map[string]any{"runningRelease": clusterRelease, "release": map[string]any{
		"hostReportedAt": now, "imageMode": n%2 == 0, "stored": nil,
		"os":           map[string]any{"prettyName": "Stratum OS", "id": "stratum", "versionId": "10", "kernel": "6.12.0-soak", "baseDigest": "", "kernelArgsDigest": ""},
		"controlPlane": map[string]any{"version": "v" + clusterRelease, "commit": "50a450a4"},
	}}
	s.mu.Lock()
	var a *agent
	if len(s.agents) > 0 && n%3 != 0 {
		a = s.agents[mrand.IntN(len(s.agents))]
	}
	s.mu.Unlock()
	c := call{op: "releaseset PUT (token)", client: s.admin, method: "PUT", url: s.adminURL("/v1/cluster/nodes/" + s.founder + "/release"), bearer: s.recTok, body: body, expect: []int{204}}
	if a != nil {
		c.url = s.adminURL("/v1/cluster/nodes/" + a.nodeID + "/release")
		if n%2 == 0 {
			c.op, c.client, c.bearer = "releaseset PUT (node leaf)", a.client, ""
		}
	}
	s.do(c)
}

type auditReader struct {
	s     *soak
	after uint64
}

// step reads the audit events after the last one seen; seqs must follow
// on without a gap.
func (r *auditReader) step() {
	var out struct {
		Events []struct {
			Seq  uint64 `json:"seq"`
			Kind string `json:"kind"`
			Prev string `json:"prev"`
		} `json:"events"`
	}
	url := r.s.adminURL(fmt.Sprintf("/v1/admin/audit?after=%d&limit=200", r.after))
	if _, _, _, ok := r.s.do(call{op: "admin audit read", client: r.s.admin, method: "GET", url: url, bearer: r.s.adminTok, expect: []int{200}, out: &out}); !ok {
		return
	}
	for _, e := range out.Events {
		if e.Seq != r.after+1 || len(e.Prev) != 64 {
			r.s.tally.checkFailed("audit: event %d (%s) follows %d", e.Seq, e.Kind, r.after)
		}
		r.after = e.Seq
	}
}
