package httpapi_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"stratum/store/storetest"
	"stratum/wire"

	"stratum/apierr"
	"stratum/buildinfo"
	"stratum/cluster"
	"stratum/crypto"
	"stratum/httpapi"
	"stratum/iam"
	"stratum/releaseset"
	"stratum/store"
	"stratum/strictjson"
)

// fixture is an initialized founder store served over real TLS with a
// server certificate from the cluster CA, and a client trusting only it.
type fixture struct {
	t        *testing.T
	db       *store.DB
	api      *httpapi.API
	srv      *httptest.Server
	client   *http.Client
	email    string
	password string

	mu         sync.Mutex
	requestIDs map[string]bool
}

// devStore opens a store in a new temporary directory (closed when the
// test ends) holding a dev cluster initialized at now and its bootstrap
// admin.
func devStore(tb testing.TB, now time.Time) (*store.DB, cluster.Identity, cluster.Secrets, *crypto.CA) {
	tb.Helper()
	db, _ := storetest.Temp(tb)
	var id cluster.Identity
	var sec cluster.Secrets
	var ca *crypto.CA
	err := db.Update(func(tx *store.Tx) error {
		var err error
		if id, sec, ca, err = cluster.Init(tx, cluster.DevDefaults(), true, now); err != nil {
			return err
		}
		return iam.CreateBootstrapAdmin(tx, id.AdminEmail, sec.AdminPassword, now)
	})
	if err != nil {
		tb.Fatal(err)
	}
	return db, id, sec, ca
}

func newFixture(t *testing.T, mod func(*store.DB, *httpapi.Deps)) *fixture {
	t.Helper()
	now := time.Now()
	db, id, sec, ca := devStore(t, now)
	d := storeDeps(db)
	d.Build = buildinfo.Info{Version: "v9.9.9-test", Commit: "abc1234"}
	d.ClusterRelease = func() string { return id.ClusterRelease }
	if mod != nil {
		mod(db, &d)
	}
	api := httpapi.New(d)

	leaf, err := ca.Issue(crypto.LeafRequest{CommonName: "stratum founder", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Validity: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(append(leaf.CertPEM, ca.CertPEM()...), leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.AdminHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	t.Cleanup(client.CloseIdleConnections)
	return &fixture{t: t, db: db, api: api, srv: srv, client: client, email: id.AdminEmail, password: sec.AdminPassword, requestIDs: map[string]bool{}}
}

// storeDeps are the services over db that the founder gives the API
// besides the domain ones a test adds: identity, node leaves, the audit
// log and the store's health.
func storeDeps(db *store.DB) httpapi.Deps {
	return httpapi.Deps{
		Identity: mustIAM(iam.Config{DB: db}), NodeLeaves: cluster.NodeLeaves{DB: db},
		Audit: store.AuditReader{DB: db}, Health: storeHealth{db},
	}
}

// storeHealth is the founder's health view of the store (founder/wiring.go).
type storeHealth struct{ db *store.DB }

func (h storeHealth) Ping() error { return h.db.View(func(*store.Tx) error { return nil }) }
func (h storeHealth) Schema() int { return h.db.Schema() }

func (h storeHealth) Degraded() []store.ForeignHolder { return h.db.ForeignHolders() }

// envelope is the error body of SPEC section 2.
type envelope struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Fields  []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"fields"`
	Issues []struct {
		Code      string `json:"code"`
		Statement int    `json:"statement"`
		Action    string `json:"action"`
	} `json:"issues"`
	Details map[string]any `json:"details"`
}

type response struct {
	status int
	header http.Header
	body   []byte
	env    envelope
	tls    *tls.ConnectionState
}

// do sends a request and checks what every response must carry: a
// request id, and for non-2xx the JSON error envelope.
func (f *fixture) do(method, path, token string, body io.Reader, contentLength int64) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if contentLength != 0 {
		req.ContentLength = contentLength
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: b, tls: resp.TLS}
	rid := resp.Header.Get("X-Request-Id")
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(rid) {
		f.t.Errorf("%s %s -> %d: X-Request-Id = %q", method, path, resp.StatusCode, rid)
	}
	if got := resp.Header.Get(wire.ProtocolHeader); got != strconv.Itoa(wire.ProtocolVersion) {
		f.t.Errorf("%s %s -> %d: %s = %q, want %d", method, path, resp.StatusCode, wire.ProtocolHeader, got, wire.ProtocolVersion)
	}
	f.mu.Lock()
	if f.requestIDs[rid] {
		f.t.Errorf("request id %s reused", rid)
	}
	f.requestIDs[rid] = true
	f.mu.Unlock()
	if resp.StatusCode >= 300 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			f.t.Errorf("%s %s -> %d: Content-Type %q, want application/json", method, path, resp.StatusCode, ct)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r.env); err != nil || r.env.Code == "" || r.env.Message == "" {
			f.t.Errorf("%s %s -> %d: body is not the error envelope (%v): %s", method, path, resp.StatusCode, err, b)
		}
		if got := httpapi.StatusOf(apiCode(r.env.Code)); got != resp.StatusCode {
			f.t.Errorf("%s %s: code %s answered with %d, its status is %d", method, path, r.env.Code, resp.StatusCode, got)
		}
	}
	return r
}

func (f *fixture) json(method, path, token string, v any) response {
	f.t.Helper()
	if v == nil {
		return f.do(method, path, token, nil, 0)
	}
	var body []byte
	switch b := v.(type) {
	case string:
		body = []byte(b)
	default:
		var err error
		if body, err = json.Marshal(v); err != nil {
			f.t.Fatal(err)
		}
	}
	return f.do(method, path, token, bytes.NewReader(body), 0)
}

func (f *fixture) login() string {
	f.t.Helper()
	r := f.json("POST", "/v1/auth/login", "", map[string]string{"email": f.email, "password": f.password})
	if r.status != 200 {
		f.t.Fatalf("login: %d %s", r.status, r.body)
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || !strings.HasPrefix(out.Token, "sat1.") {
		f.t.Fatalf("login answer %s (%v)", r.body, err)
	}
	return out.Token
}

type created struct {
	Token     string    `json:"token"`
	TokenID   string    `json:"tokenId"`
	Name      string    `json:"name"`
	ExpiresAt time.Time `json:"expiresAt"`
	Policy    iam.Policy
}

func (f *fixture) createToken(admin, name, policy string) created {
	f.t.Helper()
	r := f.json("POST", "/v1/iam/tokens", admin, fmt.Sprintf(`{"name":%q,"ttl":"1h","policy":%s}`, name, policy))
	if r.status != 201 {
		f.t.Fatalf("create token: %d %s", r.status, r.body)
	}
	var c created
	if err := json.Unmarshal(r.body, &c); err != nil || c.TokenID == "" || !strings.HasPrefix(c.Token, "sat1."+c.TokenID+".") {
		f.t.Fatalf("create token answer %s (%v)", r.body, err)
	}
	return c
}

// state counts what a refused request must not change.
func (f *fixture) state() (tokens, events int) {
	f.t.Helper()
	l, err := mustIAM(iam.Config{DB: f.db}).ListTokens()
	tokens = len(l)
	if err != nil {
		f.t.Fatal(err)
	}
	evs, err := f.db.AuditEvents(0, 1<<30)
	if err != nil {
		f.t.Fatal(err)
	}
	return tokens, len(evs)
}

// newReleaseSetFixture is newFixture with a release set over its store.
func newReleaseSetFixture(t *testing.T) (*fixture, *releaseset.Service) {
	t.Helper()
	var svc *releaseset.Service
	f := newFixture(t, func(db *store.DB, d *httpapi.Deps) {
		svc = mustSet(releaseset.Config{DB: db, Now: time.Now, Node: "n-founder"})
		d.ReleaseSet = svc
	})
	return f, svc
}

// member is the id of the fixture's first cluster member (the founder).
func (f *fixture) member() string {
	f.t.Helper()
	var node string
	if err := f.db.View(func(tx *store.Tx) error {
		members, err := cluster.Members(tx)
		if len(members) > 0 {
			node = members[0].NodeID
		}
		return err
	}); err != nil || node == "" {
		f.t.Fatalf("no member: %v", err)
	}
	return node
}

func apiCode(s string) apierr.Code { return apierr.Code(s) }

const describeOnly = `{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`

func bigLimiter(db *store.DB, d *httpapi.Deps) {
	d.Identity = mustIAM(iam.Config{DB: db, Limits: iam.LoginLimits{SourceBurst: 1000, PairBurst: 1000, AccountFailures: 1000}})
}

func TestOpsEndpoints(t *testing.T) {
	f := newFixture(t, nil)
	r := f.json("GET", "/healthz", "", nil)
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
		t.Fatalf("/healthz = %d %s", r.status, r.body)
	}
	if r.tls == nil || r.tls.Version < tls.VersionTLS12 {
		t.Fatal("/healthz was not served over TLS 1.2+")
	}
	r = f.json("GET", "/version", "", nil)
	var v map[string]any
	_ = json.Unmarshal(r.body, &v)
	if r.status != 200 || v["version"] != "v9.9.9-test" || v["commit"] != "abc1234" || v["schemaLevel"] != float64(store.SchemaVersion()) {
		t.Fatalf("/version = %d %s", r.status, r.body)
	}
	// The releases are for authenticated callers only (SPEC 10.2).
	if _, shown := v["runningRelease"]; shown {
		t.Fatalf("/version without a token shows the running release: %s", r.body)
	}
	r = f.json("GET", "/version", f.login(), nil)
	v = nil
	_ = json.Unmarshal(r.body, &v)
	if r.status != 200 || v["runningRelease"] != "0.1.0" {
		t.Fatalf("/version with a token = %d %s", r.status, r.body)
	}
	r = f.json("GET", "/startupz", "", nil)
	var s httpapi.StartupView
	if err := json.Unmarshal(r.body, &s); err != nil || r.status != 200 || s.State != "starting" || s.Phase != "init" {
		t.Fatalf("/startupz = %d %s", r.status, r.body)
	}
	r = f.json("GET", "/openapi.json", "", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || !json.Valid(r.body) {
		t.Fatalf("/openapi.json = %d %q %.100s", r.status, r.header.Get("Content-Type"), r.body)
	}

	// Unmatched paths share one metrics label: no unbounded cardinality.
	f.json("GET", "/no/such/path-0123", "", nil)
	r = f.json("GET", "/metrics", "", nil)
	if r.status != 200 || !strings.Contains(string(r.body), `stratum_http_requests_total{listener="admin",route="GET /healthz",status="200"} 1`) {
		t.Fatalf("/metrics lacks the healthz count:\n%s", r.body)
	}
	if strings.Contains(string(r.body), "path-0123") || !strings.Contains(string(r.body), `route="unmatched",status="404"`) {
		t.Error("/metrics labels an unmatched path by its URL")
	}
}

func TestStartupReady(t *testing.T) {
	st := httpapi.NewStartup()
	f := newFixture(t, func(_ *store.DB, d *httpapi.Deps) { d.Startup = st })
	st.Phase("store")
	var s httpapi.StartupView
	_ = json.Unmarshal(f.json("GET", "/startupz", "", nil).body, &s)
	if s.State != "starting" || s.Phase != "store" || s.LastBootMs != 0 {
		t.Fatalf("during boot: %+v", s)
	}
	st.Ready()
	_ = json.Unmarshal(f.json("GET", "/startupz", "", nil).body, &s)
	if s.State != "ready" || s.Phase != "serving" {
		t.Fatalf("after Ready: %+v", s)
	}
}

func TestLogin(t *testing.T) {
	f := newFixture(t, bigLimiter)
	start := time.Now()
	r := f.json("POST", "/v1/auth/login", "", map[string]string{"email": strings.ToUpper(f.email), "password": f.password})
	if r.status != 200 {
		t.Fatalf("login = %d %s", r.status, r.body)
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	if d := out.ExpiresAt.Sub(start); d < 12*time.Hour-time.Minute || d > 12*time.Hour+time.Minute {
		t.Errorf("session expires in %v, want 12h", d)
	}
	if r := f.json("GET", "/v1/iam/tokens", out.Token, nil); r.status != 200 {
		t.Fatalf("the login token does not work: %d %s", r.status, r.body)
	}

	cases := []struct {
		name string
		body any
		code string
		want int
	}{
		{"wrong password", map[string]string{"email": f.email, "password": f.password + "x"}, "UNAUTHENTICATED", 401},
		{"unknown email", map[string]string{"email": "nobody@stratum.local", "password": f.password}, "UNAUTHENTICATED", 401},
		{"empty", map[string]string{}, "UNAUTHENTICATED", 401},
		{"unknown field", `{"email":"a","password":"b","otp":"1"}`, "INVALID_INPUT", 400},
		{"not JSON", `{"email":`, "INVALID_INPUT", 400},
		{"empty body", ``, "INVALID_INPUT", 400},
	}
	var unauthMsg string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.body == "" {
				r = f.do("POST", "/v1/auth/login", "", strings.NewReader(""), 0)
			} else {
				r = f.json("POST", "/v1/auth/login", "", tc.body)
			}
			if r.status != tc.want || r.env.Code != tc.code {
				t.Fatalf("= %d %s, want %d %s", r.status, r.body, tc.want, tc.code)
			}
			if strings.Contains(string(r.body), f.password) {
				t.Fatal("the answer echoes the password")
			}
			if tc.code == "UNAUTHENTICATED" {
				if r.env.Fields != nil || r.env.Issues != nil {
					t.Errorf("UNAUTHENTICATED carries fields or issues: %s", r.body)
				}
				// The same answer for a wrong password and an unknown email.
				if unauthMsg == "" {
					unauthMsg = r.env.Message
				} else if r.env.Message != unauthMsg {
					t.Errorf("message %q differs from %q", r.env.Message, unauthMsg)
				}
			}
		})
	}
}

func TestLoginRateLimit(t *testing.T) {
	f := newFixture(t, nil) // the default limiter: 5 a minute per source
	for i := 1; i <= 5; i++ {
		r := f.json("POST", "/v1/auth/login", "", map[string]string{"email": f.email, "password": "wrong"})
		if r.status != 401 || r.env.Code != "UNAUTHENTICATED" {
			t.Fatalf("attempt %d = %d %s", i, r.status, r.body)
		}
	}
	for _, pw := range []string{"wrong", f.password} { // the right password is refused too
		r := f.json("POST", "/v1/auth/login", "", map[string]string{"email": f.email, "password": pw})
		if r.status != 429 || r.env.Code != "TOO_MANY_REQUESTS" {
			t.Fatalf("6th+ attempt = %d %s, want 429 TOO_MANY_REQUESTS", r.status, r.body)
		}
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 61 {
			t.Fatalf("Retry-After = %q, want 1..61 seconds", r.header.Get("Retry-After"))
		}
	}
}

func TestLoginRateLimitWindow(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFixture(t, func(db *store.DB, d *httpapi.Deps) {
		d.Now = clock
		d.Identity = mustIAM(iam.Config{DB: db, Now: clock})
	})
	for i := 0; i < 5; i++ {
		f.json("POST", "/v1/auth/login", "", map[string]string{"email": f.email, "password": "wrong"})
	}
	r := f.json("POST", "/v1/auth/login", "", map[string]string{"email": f.email, "password": f.password})
	if r.status != 429 || r.header.Get("Retry-After") != "61" {
		t.Fatalf("6th attempt = %d Retry-After %q, want 429 and 61 (a minute, rounded up)", r.status, r.header.Get("Retry-After"))
	}
	// The source's window (a minute) passes; the (account, source)
	// pair's (15 minutes) still holds its 5 failures.
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if r := f.json("POST", "/v1/auth/login", "", map[string]string{"email": f.email, "password": f.password}); r.status != 429 {
		t.Fatalf("after the source's window = %d %s, want 429 (the pair's limit)", r.status, r.body)
	}
	mu.Lock()
	now = now.Add(14 * time.Minute)
	mu.Unlock()
	if r := f.json("POST", "/v1/auth/login", "", map[string]string{"email": f.email, "password": f.password}); r.status != 200 {
		t.Fatalf("after both windows = %d %s", r.status, r.body)
	}
}

func TestAuthorization(t *testing.T) {
	f := newFixture(t, bigLimiter)
	admin := f.login()
	limited := f.createToken(admin, "describe-only", describeOnly)
	tokens0, events0 := f.state()

	cases := []struct {
		name, method, path, token, body string
		status                          int
		code, names                     string
	}{
		{"no token", "POST", "/v1/iam/tokens", "", `{"name":"x","policy":` + describeOnly + `}`, 401, "UNAUTHENTICATED", ""},
		{"malformed token", "GET", "/v1/iam/tokens", "not-a-token", "", 401, "UNAUTHENTICATED", ""},
		{"forged secret", "GET", "/v1/iam/tokens", limited.Token[:len(limited.Token)-4] + "AAAA", "", 401, "UNAUTHENTICATED", ""},
		{"limited: create token", "POST", "/v1/iam/tokens", limited.Token, `{"name":"x","policy":` + describeOnly + `}`, 403, "FORBIDDEN", "iam:CreateToken"},
		{"limited: list tokens", "GET", "/v1/iam/tokens", limited.Token, "", 403, "FORBIDDEN", "iam:ListTokens"},
		{"limited: revoke", "DELETE", "/v1/iam/tokens/" + limited.TokenID, limited.Token, "", 403, "FORBIDDEN", "iam:RevokeToken"},
		{"limited: audit", "GET", "/v1/admin/audit", limited.Token, "", 403, "FORBIDDEN", "audit:ReadAudit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.body == "" {
				r = f.json(tc.method, tc.path, tc.token, nil)
			} else {
				r = f.json(tc.method, tc.path, tc.token, tc.body)
			}
			if r.status != tc.status || r.env.Code != tc.code {
				t.Fatalf("= %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if tc.names != "" && !strings.Contains(r.env.Message, tc.names) {
				t.Errorf("message %q does not name %s", r.env.Message, tc.names)
			}
			if strings.Contains(string(r.body), strings.Split(limited.Token, ".")[2]) {
				t.Error("the answer echoes the token secret")
			}
		})
	}
	if tok, ev := f.state(); tok != tokens0 || ev != events0 {
		t.Errorf("refused requests changed state: tokens %d->%d, events %d->%d", tokens0, tok, events0, ev)
	}
	// 401 before 403 before the body: a bad body with a limited token is 403.
	if r := f.json("POST", "/v1/iam/tokens", limited.Token, `{"bogus":1}`); r.status != 403 {
		t.Errorf("limited token with a bad body = %d, want 403", r.status)
	}
}

func TestCreateListRevokeTokens(t *testing.T) {
	f := newFixture(t, bigLimiter)
	admin := f.login()
	c := f.createToken(admin, "ci", `{"version":"2026-01-01","statement":[{"effect":"allow","action":["iam:ListTokens"],"resource":["iam-token/*"]}]}`)
	if c.Name != "ci" || time.Until(c.ExpiresAt) > time.Hour || time.Until(c.ExpiresAt) < 59*time.Minute {
		t.Errorf("created = %+v", c)
	}
	r := f.json("GET", "/v1/iam/tokens", c.Token, nil)
	if r.status != 200 {
		t.Fatalf("list with the new token = %d %s", r.status, r.body)
	}
	var list struct {
		Tokens []map[string]any `json:"tokens"`
	}
	_ = json.Unmarshal(r.body, &list)
	if len(list.Tokens) != 1 || list.Tokens[0]["tokenId"] != c.TokenID || list.Tokens[0]["revoked"] != false {
		t.Fatalf("list = %s", r.body)
	}
	if _, ok := list.Tokens[0]["hash"]; ok || strings.Contains(string(r.body), strings.Split(c.Token, ".")[2]) {
		t.Fatal("the list carries a hash or secret")
	}

	if r := f.json("DELETE", "/v1/iam/tokens/"+c.TokenID, admin, nil); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("revoke = %d %s", r.status, r.body)
	}
	if r := f.json("GET", "/v1/iam/tokens", c.Token, nil); r.status != 401 {
		t.Fatalf("revoked token = %d, want 401", r.status)
	}
	if r := f.json("DELETE", "/v1/iam/tokens/"+c.TokenID, admin, nil); r.status != 409 || r.env.Code != "CONFLICT" {
		t.Fatalf("second revoke = %d %s", r.status, r.body)
	}
	if r := f.json("DELETE", "/v1/iam/tokens/tok-nothere00", admin, nil); r.status != 404 || r.env.Code != "NOT_FOUND" {
		t.Fatalf("revoke unknown = %d %s", r.status, r.body)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, bigLimiter)
	admin := f.login()
	tokens0, events0 := f.state()

	t.Run("policy with three faults", func(t *testing.T) {
		body := `{"name":"bad","policy":{"version":"2026-01-01","statement":[
			{"effect":"allow","action":["join:Approve"],"resource":["*"]},
			{"effect":"maybe","action":["upgrade:DescribeRelease"],"resource":["join-token/*"]}]}}`
		r := f.json("POST", "/v1/iam/tokens", admin, body)
		if r.status != 400 || r.env.Code != "INVALID_POLICY" {
			t.Fatalf("= %d %s", r.status, r.body)
		}
		type issue struct {
			Code      string
			Statement int
			Action    string
		}
		var got []issue
		for _, i := range r.env.Issues {
			got = append(got, issue{i.Code, i.Statement, i.Action})
		}
		want := []issue{{"UNKNOWN_ACTION", 0, "join:Approve"}, {"INVALID_DOCUMENT", 1, ""}, {"ACTION_NOT_APPLICABLE", 1, "upgrade:DescribeRelease"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("issues = %+v, want %+v", got, want)
		}
		if r.env.Fields != nil {
			t.Error("INVALID_POLICY carries fields")
		}
	})

	cases := []struct {
		name, body, field string
	}{
		{"unknown field", `{"name":"x","policy":` + describeOnly + `,"bogusField":true}`, "bogusField"},
		{"wrong type", `{"name":7,"policy":` + describeOnly + `}`, "name"},
		{"missing name and policy", `{}`, "name"},
		{"trailing data", `{"name":"x","policy":` + describeOnly + `} {}`, ""},
		{"truncated", `{"name":"x","pol`, ""},
		{"array body", `[]`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.json("POST", "/v1/iam/tokens", admin, tc.body)
			if r.status != 400 || r.env.Code != "INVALID_INPUT" || len(r.env.Fields) == 0 {
				t.Fatalf("= %d %s, want 400 INVALID_INPUT with fields", r.status, r.body)
			}
			if r.env.Fields[0].Field != tc.field {
				t.Errorf("fields[0].field = %q, want %q", r.env.Fields[0].Field, tc.field)
			}
			if r.env.Issues != nil {
				t.Error("INVALID_INPUT carries issues")
			}
		})
	}

	t.Run("audit query", func(t *testing.T) {
		for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=-1", "after=x"} {
			r := f.json("GET", "/v1/admin/audit?"+q, admin, nil)
			if r.status != 400 || r.env.Code != "INVALID_INPUT" || len(r.env.Fields) != 1 || !strings.HasPrefix(q, r.env.Fields[0].Field) {
				t.Errorf("?%s = %d %s", q, r.status, r.body)
			}
		}
	})

	bigBody := func() []byte {
		b := append([]byte(`{"name":"`), bytes.Repeat([]byte("a"), httpapi.DefaultBodyLimit)...)
		return append(b, `","policy":{}}`...)
	}
	t.Run("body over 1 MiB", func(t *testing.T) {
		r := f.do("POST", "/v1/iam/tokens", admin, bytes.NewReader(bigBody()), 0)
		if r.status != 413 || r.env.Code != "PAYLOAD_TOO_LARGE" {
			t.Fatalf("= %d %.200s", r.status, r.body)
		}
	})
	t.Run("body over 1 MiB, chunked", func(t *testing.T) {
		r := f.do("POST", "/v1/iam/tokens", admin, io.MultiReader(bytes.NewReader(bigBody())), -1)
		if r.status != 413 || r.env.Code != "PAYLOAD_TOO_LARGE" {
			t.Fatalf("= %d %.200s", r.status, r.body)
		}
	})
	t.Run("body of exactly 1 MiB is read", func(t *testing.T) {
		b := []byte(`{"name":"x","policy":` + describeOnly + `}`)
		b = append(b, bytes.Repeat([]byte(" "), httpapi.DefaultBodyLimit-len(b))...)
		r := f.do("POST", "/v1/iam/tokens", admin, bytes.NewReader(b), 0)
		if r.status != 201 {
			t.Fatalf("= %d %.200s", r.status, r.body)
		}
		tokens0++
		events0++
	})

	t.Run("wrong method", func(t *testing.T) {
		r := f.json("PUT", "/v1/iam/tokens", admin, `{}`)
		if r.status != 405 || r.env.Code != "METHOD_NOT_ALLOWED" {
			t.Fatalf("= %d %s", r.status, r.body)
		}
		if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
			t.Errorf("Allow = %q", allow)
		}
	})
	t.Run("unknown path", func(t *testing.T) {
		for _, p := range []string{"/v1/nothing", "/v1/iam/tokens/", "/V1/IAM/TOKENS", "/v1/iam/../iam/tokens"} {
			r := f.json("GET", p, admin, nil)
			if r.status != 404 || r.env.Code != "NOT_FOUND" {
				t.Errorf("%s = %d %s", p, r.status, r.body)
			}
		}
	})
	if tok, ev := f.state(); tok != tokens0 || ev != events0 {
		t.Errorf("refused requests changed state: tokens %d->%d, events %d->%d", tokens0, tok, events0, ev)
	}
}

func TestAuditEndpoint(t *testing.T) {
	f := newFixture(t, bigLimiter)
	admin := f.login()
	var secrets []string
	secrets = append(secrets, admin, strings.Split(admin, ".")[2], f.password)
	var ids []string
	for i := 0; i < 3; i++ {
		c := f.createToken(admin, fmt.Sprintf("t%d", i), describeOnly)
		secrets = append(secrets, c.Token, strings.Split(c.Token, ".")[2])
		ids = append(ids, c.TokenID)
	}
	if r := f.json("DELETE", "/v1/iam/tokens/"+ids[0], admin, nil); r.status != 204 {
		t.Fatal(r.status)
	}
	r := f.json("GET", "/v1/admin/audit", admin, nil)
	if r.status != 200 {
		t.Fatalf("audit = %d %s", r.status, r.body)
	}
	var out struct {
		Events []wire.AuditEvent `json:"events"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, ev := range out.Events {
		kinds = append(kinds, ev.Kind)
		if ev.Seq != uint64(i+1) || len(ev.Prev) != 64 {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	want := "cluster.initialized,iam.user.created,iam.login,iam.token.created,iam.token.created,iam.token.created,iam.token.revoked"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("kinds = %v, want %s", kinds, want)
	}
	// The acting principal is the login session, and the user behind it.
	if out.Events[3].Subject != ids[0] || out.Events[3].Actor != f.email+" via session "+out.Events[2].Subject || out.Events[3].Data["user"] != f.email || out.Events[2].Actor != "user:"+f.email {
		t.Errorf("token event = %+v", out.Events[3])
	}
	for _, s := range secrets {
		if strings.Contains(string(r.body), s) {
			t.Fatalf("the audit log holds a secret (%d chars)", len(s))
		}
	}

	r = f.json("GET", "/v1/admin/audit?after=3&limit=2", admin, nil)
	out.Events = nil
	_ = json.Unmarshal(r.body, &out)
	if len(out.Events) != 2 || out.Events[0].Seq != 4 || out.Events[1].Seq != 5 {
		t.Fatalf("after=3&limit=2 = %s", r.body)
	}
	if n, err := f.db.VerifyAudit(); err != nil || n != 7 {
		t.Fatalf("VerifyAudit = %d, %v", n, err)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	f := newFixture(t, bigLimiter)
	admin := f.login()
	f.db.Close()
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/healthz", ""},
		{"GET", "/v1/iam/tokens", admin},
	} {
		r := f.json(c.method, c.path, c.token, nil)
		if r.status != 503 || r.env.Code != "UNAVAILABLE" || !strings.Contains(r.env.Message, "Upstream temporarily unavailable") {
			t.Errorf("%s %s on a closed store = %d %s", c.method, c.path, r.status, r.body)
		}
	}
}

func TestStatusOfEveryCode(t *testing.T) {
	want := map[string]int{
		"INVALID_INPUT": 400, "INVALID_POLICY": 400, "UNAUTHENTICATED": 401, "JOIN_TOKEN_INVALID": 401,
		"FORBIDDEN": 403, "NOT_FOUND": 404, "METHOD_NOT_ALLOWED": 405, "RELEASE_MISMATCH": 409,
		"JOIN_APPROVAL_REFUSED": 409, "CONFLICT": 409, "PAYLOAD_TOO_LARGE": 413, "RANGE_NOT_SATISFIABLE": 416,
		"TOO_MANY_REQUESTS": 429, "INTERNAL": 500, "RELEASE_BUSY": 503, "RELEASE_CORRUPT": 503, "UNAVAILABLE": 503,
		"SOMETHING_ELSE": 500,
	}
	for code, status := range want {
		if got := httpapi.StatusOf(apiCode(code)); got != status {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, status)
		}
	}
}

func TestDecodeStrict(t *testing.T) {
	type inner struct {
		IP string `json:"ip"`
	}
	type req struct {
		Name string           `json:"name"`
		N    int              `json:"n"`
		Nets map[string]inner `json:"networks"`
	}
	cases := []struct {
		body, field string
		ok          bool
	}{
		{`{"name":"a","n":1}`, "", true},
		{`{"name":"a","extra":1}`, "extra", false},
		{`{"n":"one"}`, "n", false},
		{`   `, "", false},
		{`{"name":"a"}x`, "", false},
	}
	for _, tc := range cases {
		var v req
		err := strictjson.Decode([]byte(tc.body), &v)
		if tc.ok != (err == nil) {
			t.Errorf("%s: err = %v", tc.body, err)
			continue
		}
		if err != nil {
			e, _ := apierr.As(err)
			b, _ := json.Marshal(e)
			var env envelope
			_ = json.Unmarshal(b, &env)
			if env.Code != "INVALID_INPUT" || len(env.Fields) == 0 || env.Fields[0].Field != tc.field {
				t.Errorf("%s: %s, want field %q", tc.body, b, tc.field)
			}
		}
	}
}

// A nested problem is named by its full path, as SPEC section 2 shows
// ("networks.storage.ip"): encoding/json drops map keys and array indexes
// from type errors and gives no path at all for unknown fields.
func TestDecodeStrictNestedFieldPaths(t *testing.T) {
	type inner struct {
		IP string `json:"ip"`
	}
	type req struct {
		Nets map[string]inner `json:"networks"`
		List []inner          `json:"list"`
	}
	cases := map[string]string{
		`{"networks":{"storage":{"ip":1}}}`:            "networks.storage.ip",
		`{"networks":{"storage":{"ip":"x","mask":1}}}`: "networks.storage.mask",
		`{"list":[{"ip":"x"},{"ip":2}]}`:               "list[1].ip",
		`{"list":[{"ip":"x"},{"mask":2}]}`:             "list[1].mask",
	}
	for body, want := range cases {
		var v req
		err := strictjson.Decode([]byte(body), &v)
		e, ok := apierr.As(err)
		if !ok || e.Code != apierr.InvalidInput || len(e.Fields) != 1 {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if e.Fields[0].Field != want {
			t.Errorf("%s: field %q, want %q", body, e.Fields[0].Field, want)
		}
	}
}

// mustIAM builds the identity service of a test.
func mustIAM(cfg iam.Config) *iam.Service {
	s, err := iam.New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}
