package joiner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"stratum/wire"

	"stratum/crypto"
	"stratum/release"
)

// fakeFounder is a test double of the founder's join listener: real TLS
// (a cluster CA from stratum/crypto, a server leaf issued by it, the chain
// sent, any client certificate required) and the wire protocol of SPEC
// 4.2, 4.3, 4.5 and 5.3, reduced to what the joiner exercises. Its JSON is
// written with maps from the spec's field names, independently of the
// joiner's own wire structs, so a misspelt tag on either side shows.
type fakeFounder struct {
	t   *testing.T
	ca  *crypto.CA
	srv *httptest.Server

	mu             sync.Mutex
	changed        chan struct{} // closed and replaced on each state change
	clusterRelease string
	token          string
	source         string // upgrade.source; "" = the founder serves
	releaseDir     string // the release tree served while needs-upgrade
	regs           map[string]*fakeReg
	byKey          map[string]string
	seq            int

	// Scripted behaviour, called with mu held.
	onEvent func(r *fakeReg, event string)

	// Fault injection on the release endpoint, keyed by release path.
	busyOnce map[string]bool
	cutOnce  map[string]int64
	tamper   map[string]bool
	// Fault injection on registration: answer 503 UNAVAILABLE this many times.
	unavailable int
	// Refuse phase done (400) this many times.
	refuseDone int

	// What the joiner sent.
	registers   []map[string]any
	progress    []map[string]any
	releaseReqs []releaseReq
}

type fakeReg struct {
	id, keyPin, state, reason, role, release string
	queue                                    int
	served                                   []string // states answered to GET, in order
	upgrade                                  map[string]any
	delivery                                 map[string]any
}

type releaseReq struct {
	path, rangeHdr, ifRange string
}

func newFakeFounder(t *testing.T, clusterRelease string) *fakeFounder {
	t.Helper()
	ca, err := crypto.NewCA("cl-test1234", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, URIs: []*url.URL{crypto.FounderURI("cl-test1234")}, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(append(leaf.CertPEM, ca.CertPEM()...), leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFounder{t: t, ca: ca, changed: make(chan struct{}), clusterRelease: clusterRelease,
		token: "sjt1.tok1.secret", regs: map[string]*fakeReg{}, byKey: map[string]string{},
		busyOnce: map[string]bool{}, cutOnce: map[string]int64{}, tamper: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/join/registrations", f.register)
	mux.HandleFunc("GET /v1/join/registrations/{id}", f.get)
	mux.HandleFunc("POST /v1/join/registrations/{id}/progress", f.progressHandler)
	mux.HandleFunc("GET /v1/join/registrations/{id}/release/{path...}", f.releaseFile)
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS12}
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the pin test's refused handshakes
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeFounder) addr() string { return f.srv.Listener.Addr().String() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"code": code, "message": msg})
}

func keyPin(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return ""
	}
	return crypto.SPKIPin(r.TLS.PeerCertificates[0])
}

// viewOf is the joiner's view (SPEC 4.3), from the spec's field names.
func (r *fakeReg) viewOf() map[string]any {
	v := map[string]any{"joinId": r.id, "state": r.state, "reason": r.reason, "role": r.role,
		"release": r.release, "keyFingerprint": r.keyPin, "queuePosition": r.queue,
		"createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"}
	if r.state == wire.StateNeedsUpgrade {
		v["upgrade"] = r.upgrade
	}
	if r.state == wire.StateDelivering || r.state == wire.StateInstalling {
		v["delivery"] = r.delivery
	}
	return v
}

// setLocked changes a registration's state and wakes its waiters.
func (f *fakeFounder) setLocked(r *fakeReg, state string) {
	if r.state != state {
		r.state = state
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// set changes state from outside a handler (a script goroutine).
func (f *fakeFounder) set(id, state string, mutate func(r *fakeReg)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.regs[id]
	if mutate != nil {
		mutate(r)
	}
	f.setLocked(r, state)
}

func (f *fakeFounder) register(w http.ResponseWriter, req *http.Request) {
	pin := keyPin(req)
	var body map[string]any
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeErr(w, 400, "INVALID_INPUT", "malformed JSON")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registers = append(f.registers, body)
	if f.unavailable > 0 {
		f.unavailable--
		w.Header().Set("Retry-After", "1")
		writeErr(w, 503, "UNAVAILABLE", "Upstream temporarily unavailable")
		return
	}
	for _, k := range []string{"token", "release", "hostname", "machineId"} {
		if s, _ := body[k].(string); s == "" {
			writeErr(w, 400, "INVALID_INPUT", "missing "+k)
			return
		}
	}
	rel := body["release"].(string)
	if id, ok := f.byKey[pin]; ok && !wire.IsFinal(f.regs[id].state) {
		r := f.regs[id]
		if r.state == wire.StateNeedsUpgrade && rel == f.clusterRelease {
			r.release, r.upgrade = rel, nil
			f.setLocked(r, wire.StatePending)
			f.event(r, "reregistered")
		}
		writeJSON(w, 200, r.viewOf())
		return
	}
	if body["token"] != f.token {
		writeErr(w, 401, "JOIN_TOKEN_INVALID", founderTokenMessage)
		return
	}
	state := wire.StatePending
	var up map[string]any
	if rel != f.clusterRelease {
		if self, _ := body["selfUpgrade"].(bool); !self {
			writeJSON(w, 409, map[string]any{"code": "RELEASE_MISMATCH", "message": "the joiner's release does not match the cluster's",
				"details": map[string]any{"joinerRelease": rel, "clusterRelease": f.clusterRelease, "reason": "self-upgrade not requested"}})
			return
		}
		state = wire.StateNeedsUpgrade
		up = map[string]any{"from": rel, "to": f.clusterRelease, "source": f.source}
	}
	f.seq++
	r := &fakeReg{id: fmt.Sprintf("j-test%04d", f.seq), keyPin: pin, state: state, role: "control-plane", release: rel, upgrade: up}
	f.regs[r.id] = r
	f.byKey[pin] = r.id
	w.Header().Set("Location", "/v1/join/registrations/"+r.id)
	writeJSON(w, 201, r.viewOf())
	f.event(r, "registered")
}

// founderTokenMessage is the real founder's JOIN_TOKEN_INVALID message
// (join/tokens.go), advice included.
const founderTokenMessage = "the join token is unknown, expired, revoked or used up; ask the operator for a new one"

func (f *fakeFounder) event(r *fakeReg, ev string) {
	if f.onEvent != nil {
		f.onEvent(r, ev)
	}
}

// lookup finds the registration pinned to the caller's key, or answers 404.
func (f *fakeFounder) lookup(w http.ResponseWriter, req *http.Request) *fakeReg {
	r := f.regs[req.PathValue("id")]
	if r == nil || r.keyPin != keyPin(req) {
		writeErr(w, 404, "NOT_FOUND", "no such registration")
		return nil
	}
	return r
}

func (f *fakeFounder) get(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	r := f.lookup(w, req)
	if r == nil {
		f.mu.Unlock()
		return
	}
	q := req.URL.Query()
	wait := 0
	if s := q.Get("wait"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			f.mu.Unlock()
			writeErr(w, 400, "INVALID_INPUT", "bad wait")
			return
		}
		wait = min(n, 60)
	}
	if last := q.Get("state"); last != "" && last == r.state && wait > 0 {
		deadline := time.After(time.Duration(wait) * time.Second)
		for r.state == last {
			ch := f.changed
			f.mu.Unlock()
			select {
			case <-ch:
			case <-deadline:
				f.mu.Lock()
				r.served = append(r.served, r.state)
				writeJSON(w, 200, r.viewOf())
				f.mu.Unlock()
				return
			case <-req.Context().Done():
				return
			}
			f.mu.Lock()
		}
	}
	v := r.viewOf()
	r.served = append(r.served, r.state)
	f.mu.Unlock()
	writeJSON(w, 200, v)
}

// waitServed waits until the joiner has been answered state for id, so
// a scripted transition never skips a state the test wants seen.
func (f *fakeFounder) waitServed(id, state string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		seen := slices.Contains(f.regs[id].served, state)
		f.mu.Unlock()
		if seen {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fakeFounder) progressHandler(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.lookup(w, req)
	if r == nil {
		return
	}
	var body map[string]any
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeErr(w, 400, "INVALID_INPUT", "malformed JSON")
		return
	}
	f.progress = append(f.progress, body)
	switch body["phase"] {
	case wire.PhaseInstalling:
		if r.state != wire.StateDelivering {
			writeErr(w, 409, "CONFLICT", "not delivering")
			return
		}
		f.setLocked(r, wire.StateInstalling)
	case wire.PhaseDone:
		if f.refuseDone > 0 {
			f.refuseDone--
			writeErr(w, 400, "INVALID_INPUT", "done refused by the test")
			return
		}
		if r.state != wire.StateInstalling {
			writeErr(w, 409, "CONFLICT", "not installing")
			return
		}
	case wire.PhaseFailed:
		r.reason, _ = body["message"].(string)
		f.setLocked(r, wire.StateFailed)
	default:
		writeErr(w, 400, "INVALID_INPUT", "bad phase")
		return
	}
	writeJSON(w, 200, r.viewOf())
	f.event(r, "progress:"+body["phase"].(string))
}

// releaseFile serves the release tree like SPEC 5.3: pinned, only while
// needs-upgrade, only manifest files and the payload, ranges through
// http.ServeContent with ETag "sha256:<hex>"; plus the injected faults.
func (f *fakeFounder) releaseFile(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	r := f.lookup(w, req)
	if r == nil {
		f.mu.Unlock()
		return
	}
	p := req.PathValue("path")
	f.releaseReqs = append(f.releaseReqs, releaseReq{path: p, rangeHdr: req.Header.Get("Range"), ifRange: req.Header.Get("If-Range")})
	if r.state != wire.StateNeedsUpgrade || f.source != "" || release.ValidPath(p) != nil {
		f.mu.Unlock()
		writeErr(w, 404, "NOT_FOUND", "not served")
		return
	}
	busy := f.busyOnce[p]
	delete(f.busyOnce, p)
	cut, doCut := f.cutOnce[p]
	delete(f.cutOnce, p)
	tamper := f.tamper[p]
	f.mu.Unlock()

	if busy {
		w.Header().Set("Retry-After", "1")
		writeErr(w, 503, "RELEASE_BUSY", "the release semaphore is full")
		return
	}
	data, err := os.ReadFile(filepath.Join(f.releaseDir, filepath.FromSlash(p)))
	if err != nil {
		writeErr(w, 404, "NOT_FOUND", "not served")
		return
	}
	sum := sha256.Sum256(data)
	w.Header().Set("ETag", `"sha256:`+hex.EncodeToString(sum[:])+`"`)
	w.Header().Set("Accept-Ranges", "bytes")
	if doCut {
		// The whole file announced, part of it sent, then the connection
		// dropped: what a joiner sees when a cable is pulled.
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(200)
		_, _ = w.Write(data[:cut])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	if tamper {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0xff
	}
	http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(data))
}

// waitForReleaseFile reports the requests recorded for path.
func (f *fakeFounder) requestsFor(path string) []releaseReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []releaseReq
	for _, r := range f.releaseReqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// delivery builds a delivery for nodeID the way SPEC 4.6 describes it,
// with distinctive secret values the tests look for.
func (f *fakeFounder) delivery(t *testing.T, nodeID, unsealKey string) (map[string]any, secrets) {
	t.Helper()
	leaf, err := f.ca.Issue(crypto.LeafRequest{CommonName: nodeID, DNSNames: []string{nodeID}, IPs: []net.IP{net.ParseIP("192.0.2.12")},
		Client: true, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := secrets{
		nodeKey:       string(leaf.KeyPEM),
		postgres:      "pgpass-" + crypto.RandomPassword(20),
		admin:         "adminpass-" + crypto.RandomPassword(20),
		openBao:       "hvs.cp-" + crypto.RandomSecret(16),
		openBaoNode:   "hvs.node-" + crypto.RandomSecret(16),
		axdnsd:        crypto.RandomHex(32),
		unseal:        unsealKey,
		nodeCertPEM:   string(leaf.CertPEM),
		caPEM:         string(f.ca.CertPEM()),
		nodeYAML:      "nodeId: " + nodeID + "\nclusterId: cl-test1234\nrole: control-plane\nparentDomain: stratum.test\nregion: lab-1\n",
		clusterID:     "cl-test1234",
		adminEmail:    "admin@cloud.internal",
		openBaoVIP:    "192.0.2.242",
		parentDomain:  "stratum.test",
		region:        "lab-1",
		generationVal: 2,
	}
	bundle := map[string]any{
		"clusterId": s.clusterID, "role": "control-plane",
		"nodes": []any{map[string]any{"nodeId": "n-founder1", "role": "control-plane", "az": "", "mgmtIp": "192.0.2.10",
			"networks": map[string]any{"storage": map[string]any{"ip": "10.9.0.10", "interface": "vlan90"}}, "labels": map[string]any{"topology.rack": "r1"}},
			map[string]any{"nodeId": nodeID, "role": "control-plane", "az": "", "mgmtIp": "192.0.2.12", "networks": map[string]any{}, "labels": map[string]any{}}},
		"parentDomain": s.parentDomain, "region": s.region, "dnsUpstreamServers": []any{},
		"caBundle": s.caPEM, "nodeCert": s.nodeCertPEM, "nodeKey": s.nodeKey,
		"postgresPassword": s.postgres, "adminEmail": s.adminEmail, "adminPassword": s.admin,
		"openBaoToken": s.openBao, "openBaoNodeToken": s.openBaoNode, "axdnsdEncryptionKey": s.axdnsd,
		"openBaoUnsealKey": s.unseal, "generation": s.generationVal,
		"vips":        map[string]any{"api": "192.0.2.240", "postgres": "192.0.2.241", "openBao": s.openBaoVIP},
		"futureField": map[string]any{"kept": true},
	}
	return map[string]any{"nodeYaml": s.nodeYAML, "bundle": bundle}, s
}

type secrets struct {
	nodeKey, postgres, admin, openBao, openBaoNode, axdnsd, unseal  string
	nodeCertPEM, caPEM, nodeYAML, clusterID, adminEmail, openBaoVIP string
	parentDomain, region                                            string
	generationVal                                                   int
}

// testConfig is a joiner configuration for f with fast timings.
func testConfig(t *testing.T, f *fakeFounder, out io.Writer) Config {
	t.Helper()
	return Config{
		Founder:     f.addr(),
		Token:       f.token,
		CAPin:       f.ca.Pin(),
		Release:     f.clusterRelease,
		StateDir:    t.TempDir(),
		Root:        t.TempDir(),
		TPMPath:     filepath.Join(t.TempDir(), "no-tpm"),
		Hostname:    "lab-2",
		MgmtIP:      "192.0.2.12",
		Out:         out,
		pollWait:    time.Second,
		backoffBase: 20 * time.Millisecond,
		backoffMax:  200 * time.Millisecond,
		stallAfter:  5 * time.Second,
	}
}

// syncBuffer is an io.Writer safe for the joiner and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runJoiner runs the joiner with a deadline, so a hang fails the test.
func runJoiner(t *testing.T, cfg Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Run(ctx, cfg)
}

// approveAndDeliver is the operator and the queue: approve at queue
// position 2, then give the join its turn with the delivery.
func (f *fakeFounder) approveAndDeliver(r *fakeReg, delivery map[string]any) {
	go func() {
		time.Sleep(50 * time.Millisecond)
		f.set(r.id, wire.StateApproved, func(r *fakeReg) { r.queue = 2 })
		f.waitServed(r.id, wire.StateApproved)
		f.set(r.id, wire.StateDelivering, func(r *fakeReg) { r.queue = 0; r.delivery = delivery })
	}()
}

// joinSoon is the members applying the new generation after the joiner
// reported done (and has seen installing).
// acceptOn is the happy path: on event (a registration, or a
// re-registration after an upgrade) the join is approved and delivered,
// and it is joined once the joiner reports done.
func (f *fakeFounder) acceptOn(event string, delivery map[string]any) {
	f.onEvent = func(r *fakeReg, ev string) {
		switch ev {
		case event:
			f.approveAndDeliver(r, delivery)
		case "progress:done":
			f.joinSoon(r)
		}
	}
}

func (f *fakeFounder) joinSoon(r *fakeReg) {
	go func() {
		f.waitServed(r.id, wire.StateInstalling)
		f.set(r.id, wire.StateJoined, nil)
	}()
}

func contains(t *testing.T, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
