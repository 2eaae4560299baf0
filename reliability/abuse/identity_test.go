package abuse

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"
)

// joinerEndpoint is one joiner endpoint on a registration.
type joinerEndpoint struct {
	method, path string // path after /v1/join/registrations/{id}
	body         any
}

var joinerEndpoints = []joinerEndpoint{
	{"GET", "", nil},
	{"GET", "?wait=30&state=needs-upgrade", nil},
	{"GET", "?wait=30&state=pending", nil},
	{"GET", "?wait=30&state=delivering", nil},
	{"POST", "/progress", map[string]string{"phase": "failed", "message": "hostile"}},
	{"POST", "/progress", map[string]string{"phase": "installing"}},
	{"POST", "/progress", map[string]string{"phase": "done"}},
	{"GET", "/release/payload/manifest.json", nil},
	{"HEAD", "/release/payload/manifest.json", nil},
	{"GET", "/release/payload/manifest.sig", nil},
}

func identityScenarios() []scenario {
	return []scenario{
		{
			name:   "another key on every joiner endpoint",
			expect: fmt.Sprintf("404 NOT_FOUND within %v (a long-poll of 30 s is not held), the same answer as an unknown id; no state changes and no delivery leaks", 10*time.Second+loadSlack()),
			run: func(t *testing.T, e *env, c *tally) {
				others := map[string]key{"k2 (has its own registration)": e.k2, "k3 (no registration)": e.k3,
					"node A's key (joined)": e.ka, "node A's CA-issued leaf": {name: "leafA", cert: e.leafA}}
				targets := map[string]string{"r1 (needs-upgrade)": e.r1, "p1 (pending)": e.p1, "B (delivering, holds a delivery)": e.jb, "A (joined)": e.ja}
				owners := map[string]string{e.r1: e.k1.name, e.p1: e.kp.name, e.jb: e.kb.name, e.ja: e.ka.name}
				unknown := "j-" + strings.Repeat("z", 8)
				for kname, k := range others {
					for tname, id := range targets {
						if owners[id] == k.name {
							continue // its own registration
						}
						for _, ep := range joinerEndpoints {
							a := do(e.joiner(k), ep.method, e.joinURL("/v1/join/registrations/"+id+ep.path), nil, ep.body)
							u := do(e.joiner(k), ep.method, e.joinURL("/v1/join/registrations/"+unknown+ep.path), nil, ep.body)
							ok := a.status == 404 && a.elapsed < 10*time.Second+loadSlack() && !strings.Contains(string(a.body), "nodeKey") && !strings.Contains(string(a.body), "BEGIN")
							if ep.method != "HEAD" {
								ok = ok && a.is(404, "NOT_FOUND") && strings.ReplaceAll(a.apiErr().Message, id, unknown) == u.apiErr().Message
							}
							c.check(ok, "%s on %s: %s %s -> %v (unknown id -> %v)", kname, tname, ep.method, ep.path, a, u)
						}
					}
				}
				// Nothing moved.
				c.check(e.joinerState(t, e.k1, e.r1) == "needs-upgrade", "r1 after the other keys: %s", e.joinerState(t, e.k1, e.r1))
				c.check(e.joinerState(t, e.kp, e.p1) == "pending", "p1 after the other keys: %s", e.joinerState(t, e.kp, e.p1))
				c.check(e.joinerState(t, e.kb, e.jb) == "delivering", "B after the other keys: %s", e.joinerState(t, e.kb, e.jb))
				c.check(e.joinerState(t, e.ka, e.ja) == "joined", "A after the other keys: %s", e.joinerState(t, e.ka, e.ja))
			},
		},
		{
			name:   "a node's leaf on other nodes' endpoints",
			expect: "403 FORBIDDEN (also with an admin bearer token beside it: no fallback); the leaf on its own endpoints 2xx; a bearer-only endpoint 401; a self-signed leaf with another node's name refused by TLS; nothing recorded for the other node",
			run: func(t *testing.T, e *env, c *tally) {
				leafA := e.client(clientOpts{cert: &e.leafA})
				leafB := e.client(clientOpts{cert: &e.leafB})
				record := map[string]any{"runningRelease": clusterRelease, "release": map[string]any{}}
				gen := e.generation(t)
				applied := map[string]any{"generation": gen}
				membersBefore := e.membersJSON(t)
				type call struct {
					who    string
					client *http.Client
					hdr    map[string]string
					method string
					path   string
					body   any
				}
				var calls []call
				for _, other := range []string{e.nodeB, e.founderNode, "n-zzzzzzzz"} {
					for _, hdr := range []map[string]string{nil, e.bearer()} {
						who := "A's leaf"
						if hdr != nil {
							who += " + admin bearer"
						}
						calls = append(calls,
							call{who, leafA, hdr, "PUT", "/v1/cluster/nodes/" + other + "/release", record},
							call{who, leafA, hdr, "PUT", "/v1/cluster/members/" + other + "/applied", applied},
						)
					}
				}
				calls = append(calls,
					call{"B's leaf", leafB, nil, "PUT", "/v1/cluster/nodes/" + e.nodeA + "/release", record},
					call{"B's leaf", leafB, nil, "PUT", "/v1/cluster/members/" + e.nodeA + "/applied", applied},
					call{"B's leaf", leafB, nil, "PUT", "/v1/cluster/members/" + e.founderNode + "/applied", applied},
				)
				for _, cl := range calls {
					a := do(cl.client, cl.method, e.apiURL(cl.path), cl.hdr, cl.body)
					c.check(a.is(403, "FORBIDDEN"), "%s: %s %s -> %v", cl.who, cl.method, cl.path, a)
				}
				// Nothing was recorded for the other nodes.
				c.check(e.membersJSON(t) == membersBefore, "the members changed after refused reports:\nbefore %s\nafter  %s", membersBefore, e.membersJSON(t))
				set := do(e.plain, "GET", e.apiURL("/v1/admin/upgrades/release"), e.bearer(), nil)
				var rs struct {
					Nodes []struct {
						NodeID   string
						Recorded bool
					}
				}
				_ = json.Unmarshal(set.body, &rs)
				for _, n := range rs.Nodes {
					if n.NodeID == e.nodeB {
						c.check(!n.Recorded, "node B has a release record after refused reports")
					}
				}
				// A bearer-only endpoint with a leaf and no bearer: 401.
				a := do(leafA, "GET", e.apiURL("/v1/admin/cluster/members"), nil, nil)
				c.check(a.is(401, "UNAUTHENTICATED"), "A's leaf on a bearer endpoint: %v", a)
				// Controls: A's leaf on A's own endpoints.
				a = do(leafA, "PUT", e.apiURL("/v1/cluster/members/"+e.nodeA+"/applied"), nil, applied)
				c.check(a.is(200, ""), "A's leaf reporting for A: %v", a)
				a = do(leafA, "PUT", e.apiURL("/v1/cluster/nodes/"+e.nodeA+"/release"), nil, record)
				c.check(a.status == 204, "A's leaf recording A's release: %v", a)
				// A self-signed certificate naming node B, and one from another
				// CA, sent whatever CAs the server asks for: the admin listener
				// only takes certificates of the cluster CA.
				_, priv, _ := ed25519.GenerateKey(rand.Reader)
				forged := selfSigned(t, e.nodeB, priv)
				otherCA := issuedByOtherCA(t, e.nodeB)
				for name, cert := range map[string]*tls.Certificate{"self-signed": &forged, "another CA's": &otherCA} {
					a = do(e.client(clientOpts{cert: cert, force: true}), "PUT", e.apiURL("/v1/cluster/members/"+e.nodeB+"/applied"), nil, applied)
					c.check(a.err != nil && a.status == 0, "a %s leaf naming B: %v", name, a)
					c.note("%s leaf naming B refused: %v", name, a.err)
				}
			},
		},
	}
}

func (e *env) generation(t *testing.T) uint64 {
	t.Helper()
	var m struct{ Generation uint64 }
	e.mustJSON(t, do(e.plain, "GET", e.apiURL("/v1/admin/cluster/members"), e.bearer(), nil), 200, &m)
	return m.Generation
}

// membersJSON is the members list without fields that move on their own.
func (e *env) membersJSON(t *testing.T) string {
	t.Helper()
	var m struct {
		Generation uint64
		Members    []struct {
			NodeID            string
			State             string
			Generation        uint64
			AppliedGeneration uint64
		}
	}
	e.mustJSON(t, do(e.plain, "GET", e.apiURL("/v1/admin/cluster/members"), e.bearer(), nil), 200, &m)
	return fmt.Sprintf("%+v", m)
}

// issuedByOtherCA is a leaf for cn, client auth, from a CA of our own: the
// shape of a real transport leaf, from the wrong issuer.
func issuedByOtherCA(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, leafKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey}
}
