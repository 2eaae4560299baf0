// Package fakefounder is the one test double of the founder that the node
// side's tests share: the joiner's (the join listener of SPEC 4.2, 4.3,
// 4.5 and 5.3) and the agent's (its record, membership long-poll and
// applied report, SPEC 11), with real TLS: a cluster CA from
// stratum/crypto, a founder leaf issued by it with the founder SAN, the
// chain sent, any client certificate asked for (a joiner's own key on the
// join routes; a node leaf of the cluster CA, checked, on the node
// routes). Its JSON is written with maps from the spec's field names,
// independently of the wire package, so a misspelt tag on either side
// shows. Tests of a real founder use the harness (package stratumtest).
package fakefounder

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
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

	"stratum/crypto"
	"stratum/release"
	"stratum/wire"
)

// Options shape a fake founder; the zero value is a founder of cluster
// DefaultClusterID on release 0.6.0 with a fresh CA.
type Options struct {
	ClusterID      string     // default DefaultClusterID
	CA             *crypto.CA // default a new CA of ClusterID
	ClusterRelease string     // what the join listener admits; default 0.6.0
	// MemberLeaf serves with a leaf of the cluster CA without the founder
	// SAN (a member pretending to be the founder); ServerURIs, when set,
	// are the leaf's URI SANs instead of the founder's.
	MemberLeaf bool
	ServerURIs []*url.URL
}

// DefaultClusterID is the cluster a fake founder serves by default.
const DefaultClusterID = "cl-test1234"

// Founder is the fake founder. Its exported fields are the test's knobs
// and records; read or change them with Mu held.
type Founder struct {
	T   testing.TB
	CA  *crypto.CA
	Srv *httptest.Server

	Mu             sync.Mutex
	changed        chan struct{} // closed and replaced on each state change
	ClusterRelease string
	Token          string
	Source         string // upgrade.source; "" = the founder serves
	ReleaseDir     string // the release tree served while needs-upgrade
	Regs           map[string]*Reg
	byKey          map[string]string
	seq            int

	// Scripted behaviour, called with Mu held.
	OnEvent func(r *Reg, event string)
	// OnClaim, when set, judges a new registration's TPM claim: it
	// returns the attestation the joiner is shown (its challenge).
	OnClaim func(claim wire.AttestationClaim) *wire.AttestationView
	// OnProof, when set, judges a proof posted to a challenged
	// registration; the attestation becomes what it returns.
	OnProof func(r *Reg, proof wire.AttestationProof) *wire.AttestationView
	// OnServe, when set, is called once a view of r in state has been
	// made for the joiner, before it is sent: it may change r, as a
	// founder that gives up on a join while its answer is on the way
	// (the joiner gets the answer, then finds the join moved on).
	OnServe func(r *Reg, state string)
	// Proofs are the attestation proofs posted, in order.
	Proofs []wire.AttestationProof

	// Fault injection on the release endpoint, keyed by release path.
	BusyOnce map[string]bool
	CutOnce  map[string]int64
	Tamper   map[string]bool
	// Fault injection on registration: answer 503 UNAVAILABLE this many times.
	Unavailable int
	// Refuse phase done (400) this many times.
	RefuseDone int
	// Failing answers 503 UNAVAILABLE to every node route.
	Failing bool
	// Offer, when set, answers every new registration needs-upgrade with
	// this upgrade object, whatever the releases say: a compromised
	// founder offering what it likes.
	Offer map[string]any

	// What the joiner sent.
	Registers   []map[string]any
	Progress    []map[string]any
	ReleaseReqs []ReleaseReq

	// The membership the node routes serve, and what the agents sent.
	Generation uint64
	genChanged chan struct{}
	Records    []wire.RecordRequest
	Applied    []uint64
}

// Reg is one registration.
type Reg struct {
	ID, KeyPin, State, Reason, Role, Release string
	Queue                                    int
	Served                                   []string // states answered to GET, in order
	Upgrade                                  map[string]any
	Delivery                                 map[string]any
	// Attestation is the registration's TPM attestation as the joiner
	// sees it; set by OnClaim.
	Attestation *wire.AttestationView
}

// ReleaseReq is one request of a release file.
type ReleaseReq struct {
	Path, RangeHdr, IfRange string
}

// New starts a fake founder, closed when the test ends.
func New(t testing.TB, o Options) *Founder {
	t.Helper()
	if o.ClusterID == "" {
		o.ClusterID = DefaultClusterID
	}
	if o.ClusterRelease == "" {
		o.ClusterRelease = "0.6.0"
	}
	ca := o.CA
	if ca == nil {
		var err error
		if ca, err = crypto.NewCA(o.ClusterID, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	uris := []*url.URL{crypto.FounderURI(o.ClusterID)}
	switch {
	case o.MemberLeaf:
		uris = nil
	case o.ServerURIs != nil:
		uris = o.ServerURIs
	}
	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, URIs: uris, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(append(leaf.CertPEM, ca.CertPEM()...), leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := &Founder{T: t, CA: ca, changed: make(chan struct{}), ClusterRelease: o.ClusterRelease,
		Token: "sjt1.tok1.secret", Regs: map[string]*Reg{}, byKey: map[string]string{},
		BusyOnce: map[string]bool{}, CutOnce: map[string]int64{}, Tamper: map[string]bool{},
		Generation: 3, genChanged: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/join/registrations", f.register)
	mux.HandleFunc("GET /v1/join/registrations/{id}", f.get)
	mux.HandleFunc("POST /v1/join/registrations/{id}/progress", f.progressHandler)
	mux.HandleFunc("POST /v1/join/registrations/{id}/attestation", f.attestationHandler)
	mux.HandleFunc("GET /v1/join/registrations/{id}/release/{path...}", f.releaseFile)
	mux.HandleFunc("PUT /v1/cluster/nodes/{id}/release", f.node(f.record))
	mux.HandleFunc("GET /v1/cluster/members", f.node(f.members))
	mux.HandleFunc("PUT /v1/cluster/members/{id}/applied", f.node(f.applied))
	f.Srv = httptest.NewUnstartedServer(mux)
	f.Srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS12}
	f.Srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the pin tests' refused handshakes
	f.Srv.StartTLS()
	t.Cleanup(f.Srv.Close)
	return f
}

// URL is https://127.0.0.1:PORT, the --api of an agent.
func (f *Founder) URL() string { return f.Srv.URL }

// Addr is HOST:PORT, the --founder of a joiner.
func (f *Founder) Addr() string { return f.Srv.Listener.Addr().String() }

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
func (r *Reg) viewOf() map[string]any {
	v := map[string]any{"joinId": r.ID, "state": r.State, "reason": r.Reason, "role": r.Role,
		"release": r.Release, "keyFingerprint": r.KeyPin, "queuePosition": r.Queue,
		"createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"}
	if r.State == wire.StateNeedsUpgrade {
		v["upgrade"] = r.Upgrade
	}
	if r.State == wire.StateDelivering || r.State == wire.StateInstalling {
		v["delivery"] = r.Delivery
	}
	if r.Attestation != nil {
		v["attestation"] = r.Attestation
	}
	return v
}

// setLocked changes a registration's state and wakes its waiters.
func (f *Founder) setLocked(r *Reg, state string) {
	if r.State != state {
		r.State = state
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// set changes state from outside a handler (a script goroutine).
func (f *Founder) Set(id, state string, mutate func(r *Reg)) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	r := f.Regs[id]
	if mutate != nil {
		mutate(r)
	}
	f.setLocked(r, state)
}

func (f *Founder) register(w http.ResponseWriter, req *http.Request) {
	pin := keyPin(req)
	var body map[string]any
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeErr(w, 400, "INVALID_INPUT", "malformed JSON")
		return
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Registers = append(f.Registers, body)
	if f.Unavailable > 0 {
		f.Unavailable--
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
	if id, ok := f.byKey[pin]; ok && !wire.IsFinal(f.Regs[id].State) {
		r := f.Regs[id]
		if r.State == wire.StateNeedsUpgrade && rel == f.ClusterRelease {
			r.Release, r.Upgrade = rel, nil
			f.setLocked(r, wire.StatePending)
			f.event(r, "reregistered")
		}
		writeJSON(w, 200, r.viewOf())
		return
	}
	if body["token"] != f.Token {
		writeErr(w, 401, "JOIN_TOKEN_INVALID", TokenMessage)
		return
	}
	state := wire.StatePending
	var up map[string]any
	switch {
	case f.Offer != nil:
		state, up = wire.StateNeedsUpgrade, f.Offer
	case rel != f.ClusterRelease:
		if self, _ := body["selfUpgrade"].(bool); !self {
			writeJSON(w, 409, map[string]any{"code": "RELEASE_MISMATCH", "message": "the joiner's release does not match the cluster's",
				"details": map[string]any{"joinerRelease": rel, "clusterRelease": f.ClusterRelease, "reason": "self-upgrade not requested"}})
			return
		}
		state = wire.StateNeedsUpgrade
		up = map[string]any{"from": rel, "to": f.ClusterRelease, "source": f.Source}
	}
	f.seq++
	r := &Reg{ID: fmt.Sprintf("j-test%04d", f.seq), KeyPin: pin, State: state, Role: "control-plane", Release: rel, Upgrade: up}
	if claim, ok := body["attestation"]; ok && f.OnClaim != nil {
		var c wire.AttestationClaim
		raw, _ := json.Marshal(claim)
		if err := json.Unmarshal(raw, &c); err != nil {
			writeErr(w, 400, "INVALID_INPUT", "attestation: malformed")
			return
		}
		r.Attestation = f.OnClaim(c)
	}
	f.Regs[r.ID] = r
	f.byKey[pin] = r.ID
	w.Header().Set("Location", "/v1/join/registrations/"+r.ID)
	writeJSON(w, 201, r.viewOf())
	f.event(r, "registered")
}

// attestationHandler takes a proof once, as the real founder does: a
// registration without an open challenge is 409.
func (f *Founder) attestationHandler(w http.ResponseWriter, req *http.Request) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	r := f.lookup(w, req)
	if r == nil {
		return
	}
	var p wire.AttestationProof
	if err := json.NewDecoder(req.Body).Decode(&p); err != nil {
		writeErr(w, 400, "INVALID_INPUT", "malformed JSON")
		return
	}
	f.Proofs = append(f.Proofs, p)
	if r.Attestation == nil || r.Attestation.State != wire.AttestationChallenged || f.OnProof == nil {
		writeErr(w, 409, "CONFLICT", "no attestation challenge is open")
		return
	}
	r.Attestation = f.OnProof(r, p)
	writeJSON(w, 200, r.viewOf())
}

// TokenMessage is the real founder's JOIN_TOKEN_INVALID message
// (join/tokens.go), advice included.
const TokenMessage = "the join token is unknown, expired, revoked or used up; ask the operator for a new one"

func (f *Founder) event(r *Reg, ev string) {
	if f.OnEvent != nil {
		f.OnEvent(r, ev)
	}
}

// lookup finds the registration pinned to the caller's key, or answers 404.
func (f *Founder) lookup(w http.ResponseWriter, req *http.Request) *Reg {
	r := f.Regs[req.PathValue("id")]
	if r == nil || r.KeyPin != keyPin(req) {
		writeErr(w, 404, "NOT_FOUND", "no such registration")
		return nil
	}
	return r
}

func (f *Founder) get(w http.ResponseWriter, req *http.Request) {
	f.Mu.Lock()
	r := f.lookup(w, req)
	if r == nil {
		f.Mu.Unlock()
		return
	}
	q := req.URL.Query()
	wait := 0
	if s := q.Get("wait"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			f.Mu.Unlock()
			writeErr(w, 400, "INVALID_INPUT", "bad wait")
			return
		}
		wait = min(n, 60)
	}
	if last := q.Get("state"); last != "" && last == r.State && wait > 0 {
		deadline := time.After(time.Duration(wait) * time.Second)
		for r.State == last {
			ch := f.changed
			f.Mu.Unlock()
			select {
			case <-ch:
			case <-deadline:
				f.Mu.Lock()
				v := r.viewOf()
				f.served(r)
				writeJSON(w, 200, v)
				f.Mu.Unlock()
				return
			case <-req.Context().Done():
				return
			}
			f.Mu.Lock()
		}
	}
	v := r.viewOf()
	f.served(r)
	f.Mu.Unlock()
	writeJSON(w, 200, v)
}

// served records that r's state was answered, then runs OnServe, which
// may move r on after the answer went out.
func (f *Founder) served(r *Reg) {
	state := r.State
	r.Served = append(r.Served, state)
	if f.OnServe != nil {
		f.OnServe(r, state)
		if r.State != state {
			close(f.changed)
			f.changed = make(chan struct{})
		}
	}
}

// waitServed waits until the joiner has been answered state for id, so
// a scripted transition never skips a state the test wants seen.
func (f *Founder) WaitServed(id, state string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.Mu.Lock()
		seen := slices.Contains(f.Regs[id].Served, state)
		f.Mu.Unlock()
		if seen {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *Founder) progressHandler(w http.ResponseWriter, req *http.Request) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	r := f.lookup(w, req)
	if r == nil {
		return
	}
	var body map[string]any
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeErr(w, 400, "INVALID_INPUT", "malformed JSON")
		return
	}
	f.Progress = append(f.Progress, body)
	switch body["phase"] {
	case wire.PhaseInstalling:
		if r.State != wire.StateDelivering {
			writeErr(w, 409, "CONFLICT", "not delivering")
			return
		}
		f.setLocked(r, wire.StateInstalling)
	case wire.PhaseDone:
		if f.RefuseDone > 0 {
			f.RefuseDone--
			writeErr(w, 400, "INVALID_INPUT", "done refused by the test")
			return
		}
		if r.State != wire.StateInstalling {
			writeErr(w, 409, "CONFLICT", "not installing")
			return
		}
	case wire.PhaseFailed:
		r.Reason, _ = body["message"].(string)
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
func (f *Founder) releaseFile(w http.ResponseWriter, req *http.Request) {
	f.Mu.Lock()
	r := f.lookup(w, req)
	if r == nil {
		f.Mu.Unlock()
		return
	}
	p := req.PathValue("path")
	f.ReleaseReqs = append(f.ReleaseReqs, ReleaseReq{Path: p, RangeHdr: req.Header.Get("Range"), IfRange: req.Header.Get("If-Range")})
	if r.State != wire.StateNeedsUpgrade || f.Source != "" || release.ValidPath(p) != nil {
		f.Mu.Unlock()
		writeErr(w, 404, "NOT_FOUND", "not served")
		return
	}
	busy := f.BusyOnce[p]
	delete(f.BusyOnce, p)
	cut, doCut := f.CutOnce[p]
	delete(f.CutOnce, p)
	tamper := f.Tamper[p]
	f.Mu.Unlock()

	if busy {
		w.Header().Set("Retry-After", "1")
		writeErr(w, 503, "RELEASE_BUSY", "the release semaphore is full")
		return
	}
	data, err := os.ReadFile(filepath.Join(f.ReleaseDir, filepath.FromSlash(p)))
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

// Requested lists the release paths requested that contain part.
func (f *Founder) Requested(part string) []string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []string
	for _, r := range f.ReleaseReqs {
		if strings.Contains(r.Path, part) {
			out = append(out, r.Path)
		}
	}
	return out
}

// RequestsFor reports the requests recorded for path.
func (f *Founder) RequestsFor(path string) []ReleaseReq {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []ReleaseReq
	for _, r := range f.ReleaseReqs {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// delivery builds a delivery for nodeID the way SPEC 4.6 describes it,
// with distinctive secret values the tests look for.
func (f *Founder) Delivery(t testing.TB, nodeID, unsealKey string) (map[string]any, Secrets) {
	t.Helper()
	leaf, err := f.CA.Issue(crypto.LeafRequest{CommonName: nodeID, DNSNames: []string{nodeID}, IPs: []net.IP{net.ParseIP("192.0.2.12")},
		Client: true, Server: true, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := Secrets{
		NodeKey:      string(leaf.KeyPEM),
		Postgres:     "pgpass-" + crypto.RandomPassword(20),
		Admin:        "adminpass-" + crypto.RandomPassword(20),
		OpenBao:      "hvs.cp-" + crypto.RandomSecret(16),
		OpenBaoNode:  "hvs.node-" + crypto.RandomSecret(16),
		Axdnsd:       crypto.RandomHex(32),
		Unseal:       unsealKey,
		NodeCertPEM:  string(leaf.CertPEM),
		CAPEM:        string(f.CA.CertPEM()),
		NodeYAML:     "nodeId: " + nodeID + "\nclusterId: cl-test1234\nrole: control-plane\nparentDomain: stratum.test\nregion: lab-1\n",
		ClusterID:    "cl-test1234",
		AdminEmail:   "admin@cloud.internal",
		OpenBaoVIP:   "192.0.2.242",
		ParentDomain: "stratum.test",
		Region:       "lab-1",
		Generation:   2,
	}
	bundle := map[string]any{
		"clusterId": s.ClusterID, "role": "control-plane",
		"nodes": []any{map[string]any{"nodeId": "n-founder1", "role": "control-plane", "az": "", "mgmtIp": "192.0.2.10",
			"networks": map[string]any{"storage": map[string]any{"ip": "10.9.0.10", "interface": "vlan90"}}, "labels": map[string]any{"topology.rack": "r1"}},
			map[string]any{"nodeId": nodeID, "role": "control-plane", "az": "", "mgmtIp": "192.0.2.12", "networks": map[string]any{}, "labels": map[string]any{}}},
		"parentDomain": s.ParentDomain, "region": s.Region, "dnsUpstreamServers": []any{},
		"caBundle": s.CAPEM, "nodeCert": s.NodeCertPEM, "nodeKey": s.NodeKey,
		"postgresPassword": s.Postgres, "adminEmail": s.AdminEmail, "adminPassword": s.Admin,
		"openBaoToken": s.OpenBao, "openBaoNodeToken": s.OpenBaoNode, "axdnsdEncryptionKey": s.Axdnsd,
		"openBaoUnsealKey": s.Unseal, "generation": s.Generation,
		"vips":        map[string]any{"api": "192.0.2.240", "postgres": "192.0.2.241", "openBao": s.OpenBaoVIP},
		"futureField": map[string]any{"kept": true},
	}
	return map[string]any{"nodeYaml": s.NodeYAML, "bundle": bundle}, s
}

// Secrets are a delivery's values, for the tests to look for.
type Secrets struct {
	NodeKey, Postgres, Admin, OpenBao, OpenBaoNode, Axdnsd, Unseal  string
	NodeCertPEM, CAPEM, NodeYAML, ClusterID, AdminEmail, OpenBaoVIP string
	ParentDomain, Region                                            string
	Generation                                                      int
}

// ApproveAndDeliver is the operator and the queue: approve at queue
// position 2, then give the join its turn with the delivery.
func (f *Founder) ApproveAndDeliver(r *Reg, delivery map[string]any) {
	go func() {
		time.Sleep(50 * time.Millisecond)
		f.Set(r.ID, wire.StateApproved, func(r *Reg) { r.Queue = 2 })
		f.WaitServed(r.ID, wire.StateApproved)
		f.Set(r.ID, wire.StateDelivering, func(r *Reg) { r.Queue = 0; r.Delivery = delivery })
	}()
}

// AcceptOn is the happy path: on event (a registration, or a
// re-registration after an upgrade) the join is approved and delivered,
// and it is joined once the joiner reports done.
func (f *Founder) AcceptOn(event string, delivery map[string]any) {
	f.OnEvent = func(r *Reg, ev string) {
		switch ev {
		case event:
			f.ApproveAndDeliver(r, delivery)
		case "progress:done":
			f.JoinSoon(r)
		}
	}
}

// JoinSoon is the members applying the new generation after the joiner
// reported done (and has seen installing).
func (f *Founder) JoinSoon(r *Reg) {
	go func() {
		f.WaitServed(r.ID, wire.StateInstalling)
		f.Set(r.ID, wire.StateJoined, nil)
	}()
}

// node wraps a node route: 503 while Failing, then the caller must
// present a leaf of the cluster CA (the real founder's admin listener
// verifies it); its CommonName is the node.
func (f *Founder) node(h func(w http.ResponseWriter, r *http.Request, nodeID string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.Mu.Lock()
		failing := f.Failing
		f.Mu.Unlock()
		if failing {
			writeErr(w, 503, "UNAVAILABLE", "Upstream temporarily unavailable")
			return
		}
		certs := r.TLS.PeerCertificates
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: f.CA.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			writeErr(w, 401, "UNAUTHENTICATED", "not a node of this cluster")
			return
		}
		cn := certs[0].Subject.CommonName
		if id := r.PathValue("id"); id != "" && id != cn {
			writeErr(w, 404, "NOT_FOUND", "no such node")
			return
		}
		h(w, r, cn)
	}
}

func (f *Founder) record(w http.ResponseWriter, r *http.Request, _ string) {
	var req wire.RecordRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, 400, "INVALID_INPUT", "malformed JSON")
		return
	}
	f.Mu.Lock()
	f.Records = append(f.Records, req)
	f.Mu.Unlock()
	w.WriteHeader(204)
}

// members is the membership long-poll: held while the asked generation is
// the current one, up to 2 s.
func (f *Founder) members(w http.ResponseWriter, r *http.Request, nodeID string) {
	f.Mu.Lock()
	g, ch := f.Generation, f.genChanged
	f.Mu.Unlock()
	if r.URL.Query().Get("generation") == strconv.FormatUint(g, 10) {
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}
	f.Mu.Lock()
	g = f.Generation
	f.Mu.Unlock()
	writeJSON(w, 200, map[string]any{"generation": g, "members": []any{
		map[string]any{"nodeId": "n-founder1", "generation": 1},
		map[string]any{"nodeId": nodeID, "generation": g},
	}})
}

func (f *Founder) applied(w http.ResponseWriter, r *http.Request, _ string) {
	var req struct {
		Generation uint64 `json:"generation"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, 400, "INVALID_INPUT", "malformed JSON")
		return
	}
	f.Mu.Lock()
	f.Applied = append(f.Applied, req.Generation)
	f.Mu.Unlock()
	writeJSON(w, 200, map[string]any{})
}

// Bump makes a new membership generation and wakes the long-polls.
func (f *Founder) Bump() {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Generation++
	close(f.genChanged)
	f.genChanged = make(chan struct{})
}

// SetFailing turns the node routes' 503s on or off.
func (f *Founder) SetFailing(on bool) {
	f.Mu.Lock()
	f.Failing = on
	f.Mu.Unlock()
}

// Sent is what the agents recorded and the generations they reported.
func (f *Founder) Sent() ([]wire.RecordRequest, []uint64) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return slices.Clone(f.Records), slices.Clone(f.Applied)
}
