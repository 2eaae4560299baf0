package crash

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"stratum/internal/stratumtest"
	"strings"
	"sync"
	"testing"
	"time"
)

// levels order the registration states a join moves through; a state
// observed after a restart must be at least as far as the last
// acknowledged one. needs-upgrade is below pending: a re-registration
// moves it up, nothing moves it back.
var levels = map[string]int{"needs-upgrade": -1, "pending": 0, "approved": 1, "delivering": 2, "installing": 3, "joined": 4}

func final(state string) bool { return state == "rejected" || state == "failed" || state == "joined" }

func inTurn(state string) bool { return state == "delivering" || state == "installing" }

// jtoken is a join token the harness created.
type jtoken struct {
	id, secret string
	uses       int
	redeemed   int // registrations known to have used it
	inflight   int // registrations sent, not answered
	acked      bool
}

func (t *jtoken) avail() int { return t.uses - t.redeemed - t.inflight }

// reg is one joiner and its registration.
type reg struct {
	id       string
	key      *stratumtest.JoinerKey
	client   *http.Client // join listener, pinned to key
	tokenID  string
	token    string
	release  string
	ip       string
	hostname string

	acked     string          // last acknowledged state ("" before its 201)
	doneAcked bool            // a "done" report was acknowledged
	cur       string          // last observed state
	sent      map[string]bool // operations sent: approve, reject, cancel, installing, done, failed, reregister
	busy      bool            // an operation owns it
	adopted   bool            // its 201 never arrived; found after a restart

	nodeID string
	gen    uint64
	leaf   *http.Client // admin API client with the node's transport leaf
}

// record is one release record the harness sent.
type recordLog struct {
	sent       map[int]bool
	ackedFloor int // the acknowledged record with the highest sequence (sequential writer)
	sentSince  bool
}

// harness is the model of everything sent and acknowledged, and the
// founder it is sent to.
type harness struct {
	t     *testing.T
	work  string
	dir   string
	store string // a postgres:// DSN, or "" for the bbolt file in dir
	trees [2]*releaseTree

	rngMu sync.Mutex
	rng   *rand.Rand

	addrMu   sync.Mutex
	apiAddr  string
	joinAddr string

	f           *proc
	admin       *http.Client
	session     string
	recorder    string
	founderNode string

	mu          sync.Mutex
	tokens      map[string]*jtoken
	regs        map[string]*reg
	pendingKeys map[string]*reg // pin -> registration sent, no answer yet
	apiTokens   map[string]bool
	records     map[string]*recordLog
	recSeq      int
	ipSeq       int
	curTree     *releaseTree
	importAcked string          // manifest SHA-256 of the last acknowledged import
	importSent  map[string]bool // imports sent since then, outcome unknown
	acks        map[string]int
	notes       map[string]int
	auditSeen   map[string]bool
	auditAfter  uint64
	auditCount  int
	checks      int
	importDur   time.Duration
	backupDur   time.Duration
	waitLatency time.Duration

	vmu        sync.Mutex
	violations []string
}

func newHarness(t *testing.T, seed uint64) *harness {
	return &harness{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		tokens: map[string]*jtoken{}, regs: map[string]*reg{}, pendingKeys: map[string]*reg{},
		apiTokens: map[string]bool{}, records: map[string]*recordLog{}, importSent: map[string]bool{},
		acks: map[string]int{}, notes: map[string]int{}, auditSeen: map[string]bool{},
	}
}

func (h *harness) intn(n int) int {
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	return h.rng.IntN(n)
}

func (h *harness) chance(p float64) bool {
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	return h.rng.Float64() < p
}

func (h *harness) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	return lo + time.Duration(h.rng.Int64N(int64(hi-lo)))
}

// violate records a broken invariant; the test fails at the end with
// every one listed.
func (h *harness) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.vmu.Lock()
	h.violations = append(h.violations, msg)
	h.vmu.Unlock()
	h.t.Log("VIOLATION: " + msg)
}

func (h *harness) check(ok bool, format string, args ...any) {
	h.mu.Lock()
	h.checks++
	h.mu.Unlock()
	if !ok {
		h.violate(format, args...)
	}
}

func (h *harness) ack(kind string) {
	h.mu.Lock()
	h.acks[kind]++
	h.mu.Unlock()
}

func (h *harness) note(kind string) {
	h.mu.Lock()
	h.notes[kind]++
	h.mu.Unlock()
}

func (h *harness) addrs() (api, join string) {
	h.addrMu.Lock()
	defer h.addrMu.Unlock()
	return h.apiAddr, h.joinAddr
}

// adminCall calls the admin API with the operator's session.
func (h *harness) adminCall(ctx context.Context, method, path string, body any) (int, []byte, error) {
	api, _ := h.addrs()
	st, raw, _, err := call(ctx, h.admin, method, "https://"+api+path, h.session, body, nil)
	return st, raw, err
}

// joinCall calls the join listener as the joiner r.
func (h *harness) joinCall(ctx context.Context, r *reg, method, path string, body any, hdr map[string]string) (int, []byte, http.Header, error) {
	_, join := h.addrs()
	return call(ctx, r.client, method, "https://"+join+path, "", body, hdr)
}

// mustAdmin is adminCall for the verification phase: no answer or an
// unexpected status fails the test at once.
func (h *harness) mustAdmin(method, path string, body any, want int, out any) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, raw, err := h.adminCall(ctx, method, path, body)
	if err != nil || st != want {
		h.t.Fatalf("%s %s: %d %s %v\nfounder log tail:\n%s", method, path, st, raw, err, h.logTail())
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

func (h *harness) logTail() string {
	if h.f == nil {
		return ""
	}
	s := h.f.Output()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// Views as the API answers them.

type joinerView struct {
	JoinID        string `json:"joinId"`
	State         string `json:"state"`
	QueuePosition int    `json:"queuePosition"`
	Delivery      *struct {
		Bundle struct {
			NodeCert   string `json:"nodeCert"`
			NodeKey    string `json:"nodeKey"`
			Generation uint64 `json:"generation"`
		} `json:"bundle"`
	} `json:"delivery"`
}

type operatorView struct {
	JoinID         string `json:"joinId"`
	State          string `json:"state"`
	Reason         string `json:"reason"`
	TokenID        string `json:"tokenId"`
	KeyFingerprint string `json:"keyFingerprint"`
	QueuePosition  int    `json:"queuePosition"`
	Generation     uint64 `json:"generation"`
	Assignment     *struct {
		NodeID string `json:"nodeId"`
	} `json:"assignment"`
}

type tokenView struct {
	TokenID  string `json:"tokenId"`
	Uses     int    `json:"uses"`
	UsesLeft int    `json:"usesLeft"`
	State    string `json:"state"`
}

type memberView struct {
	NodeID            string `json:"nodeId"`
	State             string `json:"state"`
	Generation        uint64 `json:"generation"`
	AppliedGeneration uint64 `json:"appliedGeneration"`
}

type membersView struct {
	Generation uint64       `json:"generation"`
	Members    []memberView `json:"members"`
}

type releaseView struct {
	Release        string   `json:"release"`
	ManifestSHA256 string   `json:"manifestSha256"`
	ImportID       string   `json:"importId"`
	Corrupt        []string `json:"corrupt"`
}

type releaseSetView struct {
	Node  string `json:"node"`
	Nodes []struct {
		NodeID  string `json:"nodeId"`
		Release *struct {
			RecordedAt time.Time `json:"recordedAt"`
			OS         *struct {
				BuildID string `json:"buildId"`
			} `json:"os"`
		} `json:"release"`
	} `json:"nodes"`
}

// buildIDs maps each node of a release set to its record's os.buildId
// ("-" when it recorded nothing).
func (s releaseSetView) buildIDs() map[string]string {
	out := map[string]string{}
	for _, n := range s.Nodes {
		switch {
		case n.Release == nil:
			out[n.NodeID] = "-"
		case n.Release.OS == nil:
			out[n.NodeID] = ""
		default:
			out[n.NodeID] = n.Release.OS.BuildID
		}
	}
	return out
}

// crashSeq parses "crash-N".
func crashSeq(buildID string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(buildID, "crash-%d", &n); err != nil {
		return 0, false
	}
	return n, true
}

// leafClient is an admin API client presenting a node's transport leaf.
func (h *harness) leafClient(certPEM, keyPEM string) (*http.Client, error) {
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return nil, err
	}
	return httpClient(h.admin.Transport.(*http.Transport).TLSClientConfig.RootCAs, []tls.Certificate{pair}, false), nil
}

// idsAndNumbers blanks what differs between repeats of one violation.
var idsAndNumbers = regexp.MustCompile(`[0-9a-f]{8,}|[a-z]+-[0-9a-z]{6,}|\d+`)

// summary is the one line the run prints.
func (h *harness) summary(kills map[string]int, total int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	kinds := make([]string, 0, len(h.acks))
	ackTotal := 0
	for k, n := range h.acks {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		ackTotal += n
	}
	sort.Strings(kinds)
	killKinds := make([]string, 0, len(kills))
	for k, n := range kills {
		killKinds = append(killKinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(killKinds)
	noteKinds := make([]string, 0, len(h.notes))
	for k, n := range h.notes {
		noteKinds = append(noteKinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(noteKinds)
	h.vmu.Lock()
	v := len(h.violations)
	distinct := map[string]bool{}
	for _, msg := range h.violations {
		distinct[idsAndNumbers.ReplaceAllString(msg, "#")] = true
	}
	h.vmu.Unlock()
	return fmt.Sprintf("crash summary: kills=%d (%s); acknowledged writes=%d (%s); registrations=%d tokens=%d; verified checks=%d, audit events=%d; notes: %s; violations=%d (%d distinct)",
		total, strings.Join(killKinds, " "), ackTotal, strings.Join(kinds, " "), len(h.regs), len(h.tokens), h.checks, h.auditCount, strings.Join(noteKinds, " "), v, len(distinct))
}

// storeArgs are the flags that point a command at the harness's store.
func (h *harness) storeArgs() []string {
	if h.store == "" {
		return nil
	}
	return []string{"--store", h.store}
}

// target is the store to read offline: the database, or the file.
func (h *harness) target() string {
	if h.store != "" {
		return h.store
	}
	return filepath.Join(h.dir, "stratum.db")
}
