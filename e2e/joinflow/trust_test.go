package joinflow

// The attacks of issue 10 (SPEC 10 rules 2, 3, 5 and 10's listener
// edges), each tried against the real founder binary.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/internal/stratumtest"
)

// TestTrust02_RecordCannotLowerAdmissionRelease: a member's leaf records
// runningRelease 0.0.1; joiners on the real release are still admitted,
// a node still delivering is refused, /version tells the releases only to
// an authenticated caller, and only the operator lowers the admission
// release (allowDowngrade, audited). Joined members agreeing on a newer
// release raise it by themselves.
func TestTrust02_RecordCannotLowerAdmissionRelease(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	a := joined(t, f, "0.2.0", "192.0.2.21")

	// The attack of the first build: one record of 0.0.1 made the
	// cluster release 0.0.1 and every real joiner RELEASE_MISMATCH.
	a.record(t, "0.0.1").want(t, 204, "")
	c, reg := register(t, f, joinToken(t, f, 1), "0.2.0", "192.0.2.23")
	reg.want(t, 201, "")
	if !strings.Contains(string(reg.raw), `"state":"pending"`) {
		t.Fatalf("a joiner on the admission release after a 0.0.1 record: %s", reg.raw)
	}
	_, old := register(t, f, joinToken(t, f, 1), "0.0.1", "192.0.2.24")
	old.want(t, 409, "RELEASE_MISMATCH")

	// A node still in delivering cannot record at all.
	c.deliver(t)
	if r := c.record(t, "0.0.1"); r.status != 403 || r.err.Code != "FORBIDDEN" {
		t.Fatalf("a delivering node's record: %d %s", r.status, r.raw)
	}
	if r := send(t, f.Client, "PUT", "https://"+f.API+"/v1/cluster/nodes/"+c.nodeID+"/release", f.Operator(t).Token, releaseRecord("0.0.1")); r.status != 403 {
		t.Fatalf("a bearer record for a delivering node: %d %s", r.status, r.raw)
	}

	// /version: the releases to an authenticated caller only.
	anon := versionView(t, f, "")
	if _, shown := anon["admissionRelease"]; shown || anon["runningRelease"] != nil {
		t.Fatalf("/version without a token shows the releases: %v", anon)
	}
	v := versionView(t, f, f.Operator(t).Token)
	if v["admissionRelease"] != "0.2.0" || v["runningRelease"] != "0.0.1" {
		t.Fatalf("/version with a token: %v", v)
	}

	// Lowering needs the operator's explicit word.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(f.Operator(t).Token), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, int) {
		return run(t, append([]string{"cluster", "release", "set", "--api", "https://" + f.API, "--ca-file", filepath.Join(f.Dir, "ca.pem"), "--token-file", tokenFile}, args...)...)
	}
	if out, code := cli("0.1.0"); code == 0 || !strings.Contains(out, "allowDowngrade") {
		t.Fatalf("lowering without --allow-downgrade: exit %d: %s", code, out)
	}
	if v := versionView(t, f, f.Operator(t).Token); v["admissionRelease"] != "0.2.0" {
		t.Fatalf("a refused downgrade changed the admission release: %v", v)
	}
	if out, code := cli("0.1.0", "--allow-downgrade"); code != 0 || !strings.Contains(out, "0.1.0 (was 0.2.0)") {
		t.Fatalf("lowering with --allow-downgrade: exit %d: %s", code, out)
	}
	if out, code := cli("0.2.0"); code != 0 {
		t.Fatalf("raising: exit %d: %s", code, out)
	}
	if r := send(t, f.Client, "PUT", "https://"+f.API+"/v1/admin/cluster/release", f.Operator(t).Token, map[string]any{"release": "0.2", "allowDowngrade": false}); r.status != 400 || !r.fieldNamed("release") {
		t.Fatalf("a release that is not semver: %d %s", r.status, r.raw)
	}
	kinds := auditKinds(t, f)
	if !slices.Contains(kinds, "cluster.release.downgraded") || !slices.Contains(kinds, "cluster.release.set") {
		t.Fatalf("setting the admission release is not audited: %v", kinds)
	}

	// Every joined member (a is the only one) reports 0.3.0, which the
	// founder holds (SPEC 16.6): the admission release follows by itself.
	tree := stratumtest.SignedReleaseTree(t, "0.3.0", nil, 1024)
	tree.TrustOn(t, f)
	f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": tree.Dir}, 201, nil)
	a.record(t, "0.3.0").want(t, 204, "")
	if v := versionView(t, f, f.Operator(t).Token); v["admissionRelease"] != "0.3.0" {
		t.Fatalf("the admission release did not rise with its joined members: %v", v)
	}
	a.record(t, "0.0.1").want(t, 204, "")
	if v := versionView(t, f, f.Operator(t).Token); v["admissionRelease"] != "0.3.0" {
		t.Fatalf("a record lowered the admission release: %v", v)
	}
}

// TestTrust03_FakeListenerWithMemberLeafGetsNoToken: an intruder holding
// a member's transport leaf (serverAuth, chains to the pinned CA) runs a
// join listener with it; a real `stratum join` refuses it before sending
// a byte: exit 4, the certificate named, no retry, no token.
func TestTrust03_FakeListenerWithMemberLeafGetsNoToken(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	a := joined(t, f, "0.2.0", "192.0.2.31")
	if crypto.HasStratumURI(a.cert) {
		t.Fatalf("a node leaf carries a stratum:// URI SAN: %v", a.cert.URIs)
	}

	ca, err := os.ReadFile(filepath.Join(f.Dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	chain := append(a.leaf.Certificate, mustDER(t, ca))
	var requests atomic.Int64
	fake := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(500)
	})}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: chain, PrivateKey: a.leaf.PrivateKey}}, ClientAuth: tls.RequestClientCert})
	if err != nil {
		t.Fatal(err)
	}
	go fake.Serve(ln)
	t.Cleanup(func() { fake.Close() })

	token := joinToken(t, f, 1)
	state := t.TempDir()
	start := time.Now()
	out, code := run(t, "join", "--founder", ln.Addr().String(), "--token", token, "--ca-pin", f.Pin,
		"--release", "0.2.0", "--state-dir", state, "--root", t.TempDir(), "--hostname", "victim", "--mgmt-ip", "192.0.2.32")
	if code != 4 {
		t.Fatalf("join against a member's leaf: exit %d (want 4) after %v:\n%s", code, time.Since(start), out)
	}
	serial := a.cert.SerialNumber.Text(16)
	if !strings.Contains(out, "CN="+a.nodeID) || !strings.Contains(out, serial) {
		t.Fatalf("the refusal does not name the certificate (CN=%s serial %s):\n%s", a.nodeID, serial, out)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the joiner sent %d requests to the impostor", n)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("the joiner took %v: it retried a fatal trust failure", time.Since(start))
	}
	// The token was never used: it still registers at the real founder.
	_, reg := register(t, f, token, "0.2.0", "192.0.2.33")
	reg.want(t, 201, "")
}

func mustDER(t *testing.T, pemBytes []byte) []byte {
	t.Helper()
	c, err := crypto.ParseCertPEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.Raw
}

// TestTrust03_CancelledJoinLeafRefused: the leaf of a cancelled (and of a
// failed) join chains to the CA yet is refused on the admin API; a
// delivering node's leaf is refused until its join is installing.
func TestTrust03_CancelledJoinLeafRefused(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	m, reg := register(t, f, joinToken(t, f, 1), "0.2.0", "192.0.2.41")
	reg.want(t, 201, "")
	m.deliver(t)
	applied := func(c *member) answer {
		return send(t, c.node, "PUT", "https://"+f.API+"/v1/cluster/members/"+c.nodeID+"/applied", "", map[string]any{"generation": 1})
	}
	applied(m).want(t, 403, "FORBIDDEN")
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+m.joinID+"/cancel", map[string]any{"reason": "wrong rack"}, 200, nil)
	applied(m).want(t, 401, "UNAUTHENTICATED")
	if r := m.record(t, "0.2.0"); r.status != 401 {
		t.Fatalf("a cancelled join's leaf recording a release: %d %s", r.status, r.raw)
	}
	if v := send(t, m.node, "GET", "https://"+f.API+"/version", "", nil); strings.Contains(string(v.raw), "admissionRelease") {
		t.Fatalf("a cancelled join's leaf counts as authenticated on /version: %s", v.raw)
	}

	// A joiner that reports failed: same.
	n, reg := register(t, f, joinToken(t, f, 1), "0.2.0", "192.0.2.42")
	reg.want(t, 201, "")
	n.deliver(t)
	n.progress(t, "failed")
	applied(n).want(t, 401, "UNAUTHENTICATED")

	// The same node id handed out again gets a new leaf; the old one
	// stays refused while the new one works.
	j, reg := register(t, f, joinToken(t, f, 1), "0.2.0", "192.0.2.43")
	reg.want(t, 201, "")
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+j.joinID+"/approve", map[string]any{"nodeId": n.nodeID}, 200, nil)
	j.deliver2(t)
	j.progress(t, "installing")
	applied(j).want(t, 200, "")
	applied(n).want(t, 401, "UNAUTHENTICATED")
}

// deliver2 takes the delivery of an already approved join.
func (m *member) deliver2(t *testing.T) {
	t.Helper()
	var v struct {
		Delivery struct {
			Bundle struct{ NodeCert, NodeKey string }
		}
	}
	a := send(t, m.joiner, "GET", "https://"+m.f.Join+"/v1/join/registrations/"+m.joinID, "", nil).want(t, 200, "")
	_ = json.Unmarshal(a.raw, &v)
	pair, err := tls.X509KeyPair([]byte(v.Delivery.Bundle.NodeCert), []byte(v.Delivery.Bundle.NodeKey))
	if err != nil {
		t.Fatalf("no delivery: %s", a.raw)
	}
	m.leaf = pair
	m.nodeID = pair.Leaf.Subject.CommonName
	m.node = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.f.Pool, Certificates: []tls.Certificate{pair}}}}
}

// TestTrust05_MgmtIPRefused: addresses that are no node's own, or that the
// cluster already answers on, never reach a certificate: 400 with
// fields[mgmtIp] at registration (the token unspent), 409 at approval;
// the operator view says who chose the address.
func TestTrust05_MgmtIPRefused(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	token := joinToken(t, f, 1)
	for _, ip := range []string{apiVIP, "::1", "127.0.0.1", "0.0.0.0", "::", "224.0.0.1", "ff02::1", "169.254.10.1", "fe80::1", "255.255.255.255"} {
		_, a := register(t, f, token, "0.2.0", ip)
		if a.status != 400 || a.err.Code != "INVALID_INPUT" || !a.fieldNamed("mgmtIp") {
			t.Errorf("mgmtIp %s at registration: %d %s", ip, a.status, a.raw)
		}
	}
	var tokens struct{ Tokens []struct{ UsesLeft int } }
	f.Operator(t).Must(t, "GET", "/v1/admin/join/tokens", nil, 200, &tokens)
	if len(tokens.Tokens) != 1 || tokens.Tokens[0].UsesLeft != 1 {
		t.Fatalf("refused registrations spent the token: %+v", tokens)
	}

	m, reg := register(t, f, token, "0.2.0", "192.0.2.51")
	reg.want(t, 201, "")
	var op struct{ MgmtIP, MgmtIPSource string }
	f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations/"+m.joinID, nil, 200, &op)
	if op.MgmtIP != "192.0.2.51" || op.MgmtIPSource != "joiner" {
		t.Fatalf("operator view before approval: %+v", op)
	}
	for _, ip := range []string{apiVIP, "::1", "169.254.1.1"} {
		a := send(t, f.Client, "POST", "https://"+f.API+"/v1/admin/join/registrations/"+m.joinID+"/approve", f.Operator(t).Token, map[string]any{"mgmtIp": ip})
		if a.status != 409 || a.err.Code != "JOIN_APPROVAL_REFUSED" || !a.fieldNamed("mgmtIp") {
			t.Errorf("operator-set mgmtIp %s: %d %s", ip, a.status, a.raw)
		}
	}
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+m.joinID+"/approve", map[string]any{"mgmtIp": "192.0.2.52"}, 200, nil)
	f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations/"+m.joinID, nil, 200, &op)
	if op.MgmtIPSource != "operator" {
		t.Fatalf("operator view after an operator-set address: %+v", op)
	}
}

// TestTrust10_LongPollCap: one registration holds at most four long-polls;
// the fifth is 429 TOO_MANY_REQUESTS with Retry-After.
func TestTrust10_LongPollCap(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	m, reg := register(t, f, joinToken(t, f, 1), "0.2.0", "192.0.2.61")
	reg.want(t, 201, "")
	url := "https://" + f.Join + "/v1/join/registrations/" + m.joinID + "?wait=30&state=pending"
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			if resp, err := m.joiner.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	waitFor(t, 10*time.Second, "four held long-polls", func() bool { return metric(t, f, "stratum_join_waiters") == 4 })
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := m.joiner.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fifth long-poll: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestTrust10_ListenerTLS: the join listener speaks TLS 1.3 only; the
// admin listener TLS 1.2+ with AEAD suites only.
func TestTrust10_ListenerTLS(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	api := strings.TrimPrefix("https://"+f.API, "https://")
	dial := func(addr string, cfg *tls.Config) error {
		cfg.RootCAs = f.Pool
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			conn.Close()
		}
		return err
	}
	// A joiner presents its own key; without one any handshake fails,
	// which would prove nothing about the version.
	joinerCert := selfSignedClient(t, f.Pool, 0).Transport.(*http.Transport).TLSClientConfig.Certificates
	if err := dial(f.Join, &tls.Config{Certificates: joinerCert, MaxVersion: tls.VersionTLS12, ServerName: "localhost"}); err == nil {
		t.Fatal("the join listener accepted a TLS 1.2 client")
	}
	if err := dial(f.Join, &tls.Config{Certificates: joinerCert, MinVersion: tls.VersionTLS13, ServerName: "localhost"}); err != nil {
		t.Fatalf("the join listener refused a TLS 1.3 joiner: %v", err)
	}
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, tls.TLS_RSA_WITH_AES_128_CBC_SHA}
	if err := dial(api, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: cbc, ServerName: "localhost"}); err == nil {
		t.Fatal("the admin listener accepted a CBC suite")
	}
	if err := dial(api, &tls.Config{MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11, ServerName: "localhost"}); err == nil {
		t.Fatal("the admin listener accepted TLS 1.1")
	}
	if err := dial(api, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, ServerName: "localhost"}); err != nil {
		t.Fatalf("the admin listener refused TLS 1.2 with AES-GCM: %v", err)
	}
}
