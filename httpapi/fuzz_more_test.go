package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/buildinfo"
	"stratum/crypto"
	"stratum/httpapi"
	"stratum/iam"
	"stratum/join"
	"stratum/release"
	"stratum/release/repo"
	"stratum/releaseset"
	"stratum/wire"
)

// refusingCatalog answers every import with NOT_FOUND: the target checks
// the request body's decoding, not the importer. Its release keys are a
// real repository's, over the target's store and a temporary directory.
type refusingCatalog struct{ *repo.Service }

func (refusingCatalog) Import(_ context.Context, path string, _ repo.ImportOptions) (*release.Manifest, error) {
	return nil, apierr.New(apierr.NotFound, "no release tree at %s", path)
}
func (refusingCatalog) ImportTar(context.Context, io.Reader, repo.ImportOptions) (*release.Manifest, error) {
	return nil, apierr.New(apierr.InvalidInput, "no tar stream")
}
func (refusingCatalog) List() ([]wire.ImportedRelease, error) { return nil, nil }
func (refusingCatalog) Get(r string) (*wire.ImportedRelease, error) {
	return nil, apierr.New(apierr.NotFound, "release %s is not imported", r)
}

// trustKeyBody is POST /v1/admin/release-keys' body trusting a fixed
// release public key as name.
func trustKeyBody(tb testing.TB, name string) string {
	der, err := x509.MarshalPKIXPublicKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public())
	if err != nil {
		tb.Fatal(err)
	}
	b, err := json.Marshal(wire.TrustReleaseKey{Name: name, PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))})
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// bodyRoute is one body-taking endpoint of either listener.
type bodyRoute struct {
	method, path string
	join         bool // the join listener (client certificate), else admin
	bearer       bool // the admin session token
	node         bool // the founder node's transport leaf
}

// FuzzHTTPBodies posts fuzzed bodies through the real handlers of every
// body-taking endpoint, built once over a temporary store with the admin
// session, a node leaf and a joiner certificate. Every answer must be 2xx
// or the JSON error envelope with a known code whose status it carries;
// never INTERNAL / 500.
func FuzzHTTPBodies(f *testing.F) {
	now := time.Now()
	db, id, sec, ca := devStore(f, now)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	joins, err := join.New(join.Config{DB: db, Now: time.Now, JoinAddr: "127.0.0.1:8443", Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(joins.Close)
	schema := db.Schema()
	sets, err := releaseset.New(releaseset.Config{DB: db, Now: time.Now, Node: id.FounderNodeID, ControlPlane: wire.ControlPlane{Version: "v0.1.0", Commit: "abc1234", SchemaLevel: &schema}})
	if err != nil {
		f.Fatal(err)
	}
	d := storeDeps(db)
	d.Log, d.Build = quiet, buildinfo.Info{Version: "v9.9.9-test", Commit: "abc1234"}
	d.Identity = mustIAM(iam.Config{DB: db, Limits: iam.LoginLimits{SourceBurst: 1 << 30, PairBurst: 1 << 30, AccountFailures: 1 << 30}})
	d.ClusterRelease = func() string { return id.ClusterRelease }
	keys, err := repo.New(repo.Config{DB: db, DataDir: f.TempDir(), CacheBytes: -1, Log: quiet})
	if err != nil {
		f.Fatal(err)
	}
	d.ReleaseSet, d.JoinAdmin, d.Joiners, d.Releases = sets, joins, joins, refusingCatalog{keys}
	api := httpapi.New(d)
	admin, joinH := api.AdminHandler(), api.JoinHandler()

	leafOf := func(cn string) *x509.Certificate {
		l, err := ca.Issue(crypto.LeafRequest{CommonName: cn, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Client: true, Validity: time.Hour}, now)
		if err != nil {
			f.Fatal(err)
		}
		pair, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
		if err != nil {
			f.Fatal(err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			f.Fatal(err)
		}
		return c
	}
	nodeLeaf, joinerLeaf := leafOf(id.FounderNodeID), leafOf("joiner")

	// One pending registration, for approve, cancel and progress.
	jt, err := joins.CreateToken(iam.Principal{Subject: "user:" + id.AdminEmail}, wire.JoinTokenRequest{Role: "worker", Uses: 1000})
	if err != nil {
		f.Fatal(err)
	}
	view, _, err := joins.Register(crypto.SPKIPin(joinerLeaf), wire.RegisterRequest{Token: jt.Token, Release: id.ClusterRelease, Hostname: "node-a", MgmtIP: "10.0.0.9"})
	if err != nil {
		f.Fatal(err)
	}
	jid := view.JoinID

	serve := func(h http.Handler, method, path, token string, body []byte, tlsState *tls.ConnectionState) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		r.TLS = tlsState
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	lw := serve(admin, "POST", "/v1/auth/login", "", []byte(`{"email":"`+id.AdminEmail+`","password":"`+sec.AdminPassword+`"}`), nil)
	var login struct {
		Token string `json:"token"`
	}
	if lw.Code != 200 || json.Unmarshal(lw.Body.Bytes(), &login) != nil || login.Token == "" {
		f.Fatalf("login: %d %s", lw.Code, lw.Body)
	}

	routes := []bodyRoute{
		{method: "POST", path: "/v1/auth/login"},
		{method: "POST", path: "/v1/iam/tokens", bearer: true},
		{method: "POST", path: "/v1/admin/join/tokens", bearer: true},
		{method: "POST", path: "/v1/admin/join/registrations/" + jid + "/approve", bearer: true},
		{method: "POST", path: "/v1/admin/join/registrations/j-nosuchjoin/reject", bearer: true},
		{method: "POST", path: "/v1/admin/join/registrations/" + jid + "/cancel", bearer: true},
		{method: "PUT", path: "/v1/cluster/nodes/" + id.FounderNodeID + "/release", bearer: true},
		{method: "POST", path: "/v1/admin/releases", bearer: true},
		{method: "POST", path: "/v1/admin/release-keys", bearer: true},
		{method: "PUT", path: "/v1/cluster/members/" + id.FounderNodeID + "/applied", node: true},
		{method: "POST", path: "/v1/join/registrations", join: true},
		{method: "POST", path: "/v1/join/registrations/" + jid + "/progress", join: true},
		{method: "POST", path: "/v1/admin/cluster/members/" + id.FounderNodeID + "/remove", bearer: true},
		{method: "POST", path: "/v1/cluster/nodes/" + id.FounderNodeID + "/leaf", node: true},
	}
	for i, s := range [][]string{
		{`{"email":"a@b.c","password":"x"}`, `{"email":1}`, `{"email":"a@b.c","password":"x","x":1}`},
		{`{"name":"ci","ttl":"1h","policy":` + describeOnly + `}`, `{"name":"ci","ttl":"1h","policy":{"version":"2026-01-01","statement":[{"effect":"allow","action":["nope:Nope"],"resource":["*"]}]}}`, `{"name":"","ttl":"-1h"}`},
		{`{"role":"worker","ttl":"7d","uses":2}`, `{"role":"worker","uses":0}`},
		{`{}`, `{"nodeId":"n-abcd1234","az":"az-1","networks":{"storage":{"ip":"10.1.0.7"}}}`, `{"networks":{"storage":{"ipp":"x"}}}`},
		{``, `{"reason":"wrong rack"}`},
		{`{"reason":"\ud800"}`},
		{`{"runningRelease":"0.1.0","release":{}}`, `{"release":null}`},
		{`{"path":"/srv/release"}`, `{"path":""}`, `{"path":1}`},
		{trustKeyBody(f, "k1.pub"), trustKeyBody(f, "../k.pub"), trustKeyBody(f, ""), `{"name":"k.pub","publicKey":"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}`, `{"name":"k.pub"}`},
		{`{"generation":1}`, `{"generation":0}`},
		{`{"token":"` + jt.Token + `","release":"0.1.0","hostname":"node-b"}`, `{"token":"sjt1.x","release":"9.9.9","hostname":"h"}`},
		{`{"phase":"installing"}`, `{"phase":"failed","message":"x"}`},
		{`{"reason":"hardware gone"}`, `{}`},
		{`{"publicKey":` + strconv.Quote(p256PublicKeyPEM(f)) + `}`, `{"publicKey":"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}`, `{"publicKey":""}`, `{}`},
	} {
		for _, b := range s {
			f.Add(uint8(i), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, sel uint8, body []byte) {
		rt := routes[int(sel)%len(routes)]
		h, token := admin, ""
		var state *tls.ConnectionState
		switch {
		case rt.join:
			h = joinH
			state = &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{joinerLeaf}}
		case rt.node:
			state = &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{nodeLeaf}, VerifiedChains: [][]*x509.Certificate{{nodeLeaf}}}
		case rt.bearer:
			token = login.Token
		}
		w := serve(h, rt.method, rt.path, token, body, state)
		if w.Code >= 200 && w.Code < 300 {
			return
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s -> %d with Content-Type %q", rt.method, rt.path, w.Code, ct)
		}
		var env apierr.Error
		dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env); err != nil || env.Code == "" || env.Message == "" {
			t.Fatalf("%s %s -> %d: not the error envelope (%v): %s", rt.method, rt.path, w.Code, err, w.Body)
		}
		if env.Code == apierr.Internal && knownBug(rt.path, body) {
			t.Skip("known bug: iam.statementOf panics on a policy key \"statement[\" (reported)")
		}
		if env.Code == apierr.Internal || w.Code == http.StatusInternalServerError {
			t.Fatalf("%s %s body %q -> %d %s", rt.method, rt.path, body, w.Code, w.Body)
		}
		if httpapi.StatusOf(env.Code) != w.Code {
			t.Fatalf("%s %s: code %s answered with %d", rt.method, rt.path, env.Code, w.Code)
		}
	})
}

// knownBug lets a long fuzzing run (STRATUM_FUZZ_SKIP_KNOWN=1) look past
// the reported iam.statementOf panic, answered as 500 on POST
// /v1/iam/tokens. Without the variable, go test replays the kept input
// in testdata/fuzz/FuzzHTTPBodies and fails until the bug is fixed.
func knownBug(path string, body []byte) bool {
	return os.Getenv("STRATUM_FUZZ_SKIP_KNOWN") != "" && path == "/v1/iam/tokens" && bytes.Contains(body, []byte("statement["))
}

// p256PublicKeyPEM is a fresh ECDSA P-256 public key as a node sends it
// to renew its leaf.
func p256PublicKeyPEM(tb testing.TB) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		tb.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
