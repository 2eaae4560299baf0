package joinflow

// Helpers of the trust tests (SPEC 10): a founder on a given release, and
// joiners driven over HTTP with their own key, so a test can hold a
// member's transport leaf the way an intruder who took one would.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// trustFounder initializes a cluster on release rel with the API VIP
// 192.0.2.200 and serves it (not --dev: loopback is refused) with extra
// flags.
func trustFounder(t *testing.T, rel string, extra ...string) *stratumtest.Founder {
	t.Helper()
	return trustFounderOn(t, rel, "", extra...)
}

// trustFounderOn is trustFounder with its state on dsn (the bbolt file
// when empty).
func trustFounderOn(t *testing.T, rel, dsn string, extra ...string) *stratumtest.Founder {
	t.Helper()
	work := t.TempDir()
	dir := filepath.Join(work, "founder")
	cfg := filepath.Join(work, "cluster.yaml")
	yaml := "parentDomain: stratum.example.com\nregion: lab-1\nclusterRelease: " + rel + "\ndnsUpstreamServers: []\nvips:\n  api: " + apiVIP + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var store []string
	if dsn != "" {
		store = []string{"--store", dsn}
	}
	mustRun(t, append([]string{"init", "--data", dir, "--config", cfg}, store...)...)
	return stratumtest.Serve(t, dir, append(store, extra...)...)
}

const apiVIP = "192.0.2.200"

// answer is one HTTP answer: status, raw body, and the error envelope.
type answer struct {
	status int
	raw    []byte
	err    struct {
		Code   string
		Fields []struct{ Field, Message string }
	}
}

func send(t *testing.T, c *http.Client, method, url, bearer string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	a.raw, _ = io.ReadAll(resp.Body)
	if a.status >= 300 {
		_ = json.Unmarshal(a.raw, &a.err)
	}
	return a
}

func (a answer) want(t *testing.T, status int, code string) answer {
	t.Helper()
	if a.status != status || (code != "" && a.err.Code != code) {
		t.Fatalf("answer %d %s, want %d %s", a.status, a.raw, status, code)
	}
	return a
}

func (a answer) fieldNamed(name string) bool {
	for _, f := range a.err.Fields {
		if f.Field == name {
			return true
		}
	}
	return false
}

// joinToken makes a token of role worker with uses.
func joinToken(t *testing.T, f *stratumtest.Founder, uses int) string {
	t.Helper()
	var tok struct{ Token string }
	f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": "worker", "uses": uses}, 201, &tok)
	return tok.Token
}

// member is a joiner driven over HTTP: its own key on the join
// listener, and once delivered, its transport leaf on the admin API.
type member struct {
	f      *stratumtest.Founder
	joiner *http.Client
	joinID string
	nodeID string
	leaf   tls.Certificate
	cert   *x509.Certificate
	node   *http.Client // the admin API with the node's leaf
}

// register registers a new joiner on rel with mgmt.
func register(t *testing.T, f *stratumtest.Founder, token, rel, mgmt string) (*member, answer) {
	t.Helper()
	m := &member{f: f, joiner: selfSignedClient(t, f.Pool, 0)}
	a := send(t, m.joiner, "POST", "https://"+f.Join+"/v1/join/registrations", "", map[string]any{"token": token, "release": rel, "hostname": "lab-" + strings.NewReplacer(".", "-", ":", "x").Replace(mgmt) + "x", "mgmtIp": mgmt})
	if a.status == 201 || a.status == 200 {
		var v struct{ JoinID string }
		_ = json.Unmarshal(a.raw, &v)
		m.joinID = v.JoinID
	}
	return m, a
}

// deliver approves m and takes its delivery: its node id and leaf.
func (m *member) deliver(t *testing.T) {
	t.Helper()
	var op struct{ Assignment struct{ NodeID string } }
	m.f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+m.joinID+"/approve", map[string]any{}, 200, &op)
	m.nodeID = op.Assignment.NodeID
	var v struct {
		State    string
		Delivery struct {
			Bundle struct{ NodeCert, NodeKey string }
		}
	}
	a := send(t, m.joiner, "GET", "https://"+m.f.Join+"/v1/join/registrations/"+m.joinID, "", nil).want(t, 200, "")
	_ = json.Unmarshal(a.raw, &v)
	if v.State != "delivering" || v.Delivery.Bundle.NodeCert == "" {
		t.Fatalf("after approval: %s", a.raw)
	}
	pair, err := tls.X509KeyPair([]byte(v.Delivery.Bundle.NodeCert), []byte(v.Delivery.Bundle.NodeKey))
	if err != nil {
		t.Fatal(err)
	}
	m.leaf = pair
	m.cert, _ = x509.ParseCertificate(pair.Certificate[0])
	m.node = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.f.Pool, Certificates: []tls.Certificate{pair}}}}
}

// progress reports phase on the join listener.
func (m *member) progress(t *testing.T, phase string) {
	t.Helper()
	send(t, m.joiner, "POST", "https://"+m.f.Join+"/v1/join/registrations/"+m.joinID+"/progress", "", map[string]any{"phase": phase}).want(t, 200, "")
}

// joined runs a full join: delivered, installing, done.
func joined(t *testing.T, f *stratumtest.Founder, rel, mgmt string) *member {
	t.Helper()
	m, a := register(t, f, joinToken(t, f, 1), rel, mgmt)
	a.want(t, 201, "")
	m.deliver(t)
	m.progress(t, "installing")
	m.progress(t, "done")
	return m
}

// releaseRecord is a minimal valid release record claiming rel.
func releaseRecord(rel string) map[string]any {
	return map[string]any{"runningRelease": rel, "release": map[string]any{"imageMode": false, "os": map[string]any{"prettyName": "Debian", "id": "debian", "versionId": "12", "kernel": "6.1"}}}
}

// record PUTs m's release record with its own leaf.
func (m *member) record(t *testing.T, rel string) answer {
	t.Helper()
	return send(t, m.node, "PUT", "https://"+m.f.API+"/v1/cluster/nodes/"+m.nodeID+"/release", "", releaseRecord(rel))
}

// versionView is /version, with or without the admin token.
func versionView(t *testing.T, f *stratumtest.Founder, bearer string) map[string]any {
	t.Helper()
	a := send(t, f.Client, "GET", "https://"+f.API+"/version", bearer, nil).want(t, 200, "")
	var v map[string]any
	_ = json.Unmarshal(a.raw, &v)
	return v
}

// auditKinds lists the kinds of the audit events.
func auditKinds(t *testing.T, f *stratumtest.Founder) []string {
	t.Helper()
	var out struct{ Events []struct{ Kind string } }
	f.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &out)
	var kinds []string
	for _, e := range out.Events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}
