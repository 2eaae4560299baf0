package e2e

// SPEC section 16 attacks on the real binary, on bbolt and on PostgreSQL.

import (
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	_ "stratum/founder" // registers its store migrations
	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
	"stratum/store"
)

// backend is where a test founder keeps its state.
type backend struct {
	name string
	dsn  func(t *testing.T) string // "" for the bbolt file
}

var backends = []backend{
	{"bbolt", func(*testing.T) string { return "" }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// onBackend is a --dev founder serving one backend: its data directory,
// its store (dsn, empty for bbolt) and its bootstrap admin.
type onBackend struct {
	f               *stratumtest.Founder
	dir, dsn        string
	email, password string
}

// serveStore is the flag of serve (and init) naming the store dsn (none for
// the bbolt file).
func serveStore(dsn string) []string {
	if dsn == "" {
		return nil
	}
	return []string{"--store", dsn}
}

// eachBackend runs test once per store backend, each on a new --dev
// founder.
func eachBackend(t *testing.T, test func(t *testing.T, o onBackend)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			o := onBackend{dsn: be.dsn(t), dir: t.TempDir()}
			o.f = stratumtest.ServeDev(t, o.dir, serveStore(o.dsn)...)
			o.email, o.password = credentials(t, o.dir)
			test(t, o)
		})
	}
}

// lab joins nodes to a founder as their joiners would, keeping each
// member's transport leaf so it can report the generations it applies.
type lab struct {
	f       *stratumtest.Founder
	admin   string
	members []labMember
}

type labMember struct {
	nodeID string
	client *http.Client
}

// join registers a joiner with a one-use token of role, has it approved
// and returns the bundle it was delivered (raw keys); every member then
// applies the new generation so the next delivery may go.
func (l *lab) join(t *testing.T, role, mgmt string) map[string]json.RawMessage {
	t.Helper()
	f, admin := l.f, l.admin
	status, body, err := call(f, "POST", "/v1/admin/join/tokens", admin, map[string]any{"role": role, "ttl": "1h", "uses": 1})
	var jt struct{ Token string }
	if err != nil || status != 201 || json.Unmarshal(body, &jt) != nil {
		t.Fatalf("join token: %d %s %v", status, body, err)
	}
	j := newJoinerClient(t, filepath.Join(f.Dir, "ca.pem"))
	status, body = j.do(t, "POST", "https://"+f.Join+"/v1/join/registrations", map[string]any{"token": jt.Token, "release": "0.1.0", "hostname": "lab-" + strings.ReplaceAll(mgmt, ".", "-"), "mgmtIp": mgmt})
	var reg struct{ JoinID string }
	if status != 201 || json.Unmarshal(body, &reg) != nil {
		t.Fatalf("register %s: %d %s", role, status, body)
	}
	var op struct{ Assignment struct{ NodeID string } }
	if status, body, err = call(f, "POST", "/v1/admin/join/registrations/"+reg.JoinID+"/approve", admin, map[string]any{}); err != nil || status != 200 || json.Unmarshal(body, &op) != nil {
		t.Fatalf("approve %s: %d %s %v", role, status, body, err)
	}
	var v struct {
		State    string
		Delivery struct{ Bundle map[string]json.RawMessage }
	}
	status, body = j.do(t, "GET", "https://"+f.Join+"/v1/join/registrations/"+reg.JoinID, nil)
	if status != 200 || json.Unmarshal(body, &v) != nil || v.State != "delivering" {
		t.Fatalf("%s after approval: %d state %q", role, status, v.State)
	}
	var g uint64
	_ = json.Unmarshal(v.Delivery.Bundle["generation"], &g)
	pair, err := tls.X509KeyPair([]byte(str(v.Delivery.Bundle["nodeCert"])), []byte(str(v.Delivery.Bundle["nodeKey"])))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.Pool, Certificates: []tls.Certificate{pair}}}
	t.Cleanup(tr.CloseIdleConnections)
	for _, m := range l.members {
		req, _ := http.NewRequest("PUT", "https://"+f.API+"/v1/cluster/members/"+m.nodeID+"/applied", strings.NewReader(fmt.Sprintf(`{"generation":%d}`, g)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := m.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("member %s applied %d: %d", m.nodeID, g, resp.StatusCode)
		}
	}
	l.members = append(l.members, labMember{nodeID: op.Assignment.NodeID, client: &http.Client{Timeout: 30 * time.Second, Transport: tr}})
	for _, phase := range []string{"installing", "done"} {
		if status, body := j.do(t, "POST", "https://"+f.Join+"/v1/join/registrations/"+reg.JoinID+"/progress", map[string]any{"phase": phase}); status != 200 {
			t.Fatalf("%s progress %s: %d %s", role, phase, status, body)
		}
	}
	return v.Delivery.Bundle
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// setSchema puts the store's schema version back to v, as an earlier
// build left it (the founder is stopped).
func setSchema(t *testing.T, dir, dsn string, v int) {
	t.Helper()
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(v))
	if dsn == "" {
		boltEdit(t, dir, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), buf[:]) })
		return
	}
	pgExec(t, dsn, "UPDATE stratum_kv SET value = $1 WHERE bucket = 'meta' AND key = 'schema'", buf[:])
}

// migrationBefore is the schema version just before the migration named
// like name.
func migrationBefore(t *testing.T, name string) int {
	t.Helper()
	prev := 0
	for _, m := range store.Migrations() {
		if strings.Contains(m.Name, name) {
			return prev
		}
		prev = m.Version
	}
	t.Fatalf("no migration named like %q", name)
	return 0
}

// TestTrust16_1_ApplianceLoginNeverDelivered: a worker's bundle carries
// none of the cluster secrets, a postgres node's only its password, and
// the control plane's adminPassword (a cluster secret) does not log in
// to the appliance. A data directory whose appliance admin password is
// the delivered secret (an earlier build) is migrated: the account logs
// in but may only change its password until it does.
func TestTrust16_1_ApplianceLoginNeverDelivered(t *testing.T) {
	eachBackend(t, func(t *testing.T, o onBackend) {
		f, dir, dsn, email, password := o.f, o.dir, o.dsn, o.email, o.password
		admin := f.Login(t, email, password).Token

		l := &lab{f: f, admin: admin}
		worker := l.join(t, "worker", "192.0.2.31")
		for _, k := range []string{"adminPassword", "adminEmail", "postgresPassword", "openBaoToken", "openBaoNodeToken", "openBaoUnsealKey", "axdnsdEncryptionKey"} {
			if v, ok := worker[k]; ok {
				t.Errorf("the worker's bundle carries %s (%d bytes)", k, len(v))
			}
		}
		pg := l.join(t, "postgres", "192.0.2.32")
		if str(pg["postgresPassword"]) == "" {
			t.Error("the postgres node's bundle has no postgresPassword")
		}
		for _, k := range []string{"adminPassword", "adminEmail", "openBaoToken", "openBaoNodeToken", "openBaoUnsealKey", "axdnsdEncryptionKey"} {
			if _, ok := pg[k]; ok {
				t.Errorf("the postgres node's bundle carries %s", k)
			}
		}
		cp := l.join(t, "control-plane", "192.0.2.33")
		clusterAdmin := str(cp["adminPassword"])
		if clusterAdmin == "" || str(cp["postgresPassword"]) == "" || len(str(cp["axdnsdEncryptionKey"])) != 64 {
			t.Fatalf("the control plane's bundle lacks a cluster secret: %v", keysOf(cp))
		}
		// No OpenBao is configured here: its tokens are absent, never
		// made up (SPEC 19).
		for _, k := range []string{"openBaoToken", "openBaoNodeToken"} {
			if _, ok := cp[k]; ok {
				t.Errorf("the control plane's bundle carries %s with no OpenBao configured", k)
			}
		}
		if _, ok := cp["openBaoUnsealKey"]; !ok {
			t.Error("the control plane's bundle has no openBaoUnsealKey")
		}
		// The attack: the delivered admin password on the appliance.
		for _, who := range []string{str(cp["adminEmail"]), email} {
			status, body, err := call(f, "POST", "/v1/auth/login", "", map[string]any{"email": who, "password": clusterAdmin})
			if err != nil || status != 401 {
				t.Fatalf("login as %s with the delivered adminPassword: %d %s %v, want 401", who, status, body, err)
			}
		}

		// An earlier build: the appliance admin's password is the
		// delivered secret. The migration marks it must-change.
		if status, body, err := call(f, "POST", "/v1/auth/password", admin, map[string]any{"currentPassword": password, "newPassword": clusterAdmin}); err != nil || status >= 300 {
			t.Fatalf("set the old build's password: %d %s %v", status, body, err)
		}
		f.Stop(os.Interrupt, 20*time.Second)
		setSchema(t, dir, dsn, migrationBefore(t, "appliance admin"))
		if err := stratumtest.ForgetAuditHWM(dir); err != nil {
			t.Fatal(err)
		}
		g := stratumtest.ServeDev(t, dir, serveStore(dsn)...)
		status, body, err := call(g, "POST", "/v1/auth/login", "", map[string]any{"email": email, "password": clusterAdmin})
		var sess struct {
			Token              string
			MustChangePassword bool
		}
		if err != nil || status != 200 || json.Unmarshal(body, &sess) != nil || !sess.MustChangePassword {
			t.Fatalf("login after the migration: %d %s %v, want 200 with mustChangePassword", status, body, err)
		}
		for _, p := range []string{"/v1/iam/tokens", "/v1/auth/self", "/v1/admin/join/registrations"} {
			status, body, _ := call(g, "GET", p, sess.Token, nil)
			var e struct {
				Code    string
				Details map[string]any
			}
			_ = json.Unmarshal(body, &e)
			if status != 403 || e.Details["mustChangePassword"] != true {
				t.Errorf("GET %s before the change: %d %s, want 403 with mustChangePassword", p, status, body)
			}
		}
		if status, body, _ := call(g, "POST", "/v1/admin/join/tokens", sess.Token, map[string]any{"role": "worker"}); status < 400 {
			t.Errorf("a join token before the change: %d %s", status, body)
		}
		if status, body, _ := call(g, "POST", "/v1/auth/password", sess.Token, map[string]any{"currentPassword": clusterAdmin, "newPassword": "a-new-appliance-password"}); status >= 300 {
			t.Fatalf("password change: %d %s", status, body)
		}
		if status, body, _ := call(g, "GET", "/v1/iam/tokens", sess.Token, nil); status != 200 {
			t.Fatalf("after the change: %d %s", status, body)
		}
		status, body, _ = call(g, "POST", "/v1/auth/login", "", map[string]any{"email": email, "password": "a-new-appliance-password"})
		if status != 200 || strings.Contains(string(body), "mustChangePassword") {
			t.Fatalf("login after the change: %d %s", status, body)
		}
		if status, _, _ := call(g, "POST", "/v1/auth/login", "", map[string]any{"email": email, "password": clusterAdmin}); status != 401 {
			t.Fatalf("the delivered secret after the change: %d, want 401", status)
		}
	})
}

func keysOf(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTrust16_5_LoginLimitsHold: 60 concurrent wrong logins from 12
// loopback sources are each checked at most as often as the limit allows
// (counted before the check), the right password then from any of them is
// refused alike, and from a source that has not failed it still logs in
// (slowed, never refused). 20 concurrent attempts from one source pass
// the check exactly 5 times. Login takes application/json only.
func TestTrust16_5_LoginLimitsHold(t *testing.T) {
	eachBackend(t, func(t *testing.T, o onBackend) {
		f, email, password := o.f, o.email, o.password

		type answer struct {
			source string
			status int
		}
		burst := func(n int, source func(i int) string, pw func(i int) string) []answer {
			out := make([]answer, n)
			clients := map[string]*http.Client{}
			for i := range n {
				if clients[source(i)] == nil {
					// Each wrong password costs an argon2id check,
					// two at a time: a loaded machine needs minutes.
					c := fromSource(t, f, source(i))
					c.Timeout = 5 * time.Minute
					clients[source(i)] = c
				}
			}
			done := make(chan struct{})
			for i := range n {
				go func() {
					defer func() { done <- struct{}{} }()
					st, _ := loginFrom(clients[source(i)], f.API, email, pw(i))
					out[i] = answer{source(i), st}
				}()
			}
			for range n {
				<-done
			}
			return out
		}
		src := func(i int) string { return fmt.Sprintf("127.0.3.%d", 1+i%12) }
		wrong := func(i int) string { return fmt.Sprintf("guess-%d", i) }
		checked := map[string]int{}
		for _, a := range burst(60, src, wrong) {
			switch a.status {
			case 401:
				checked[a.source]++
			case 429:
			default:
				t.Fatalf("a wrong login from %s answered %d", a.source, a.status)
			}
		}
		for s, n := range checked {
			if n > 5 {
				t.Errorf("%s had %d wrong passwords checked, the limit is 5", s, n)
			}
		}
		for _, a := range burst(12, src, func(int) string { return password }) {
			if a.status != 429 {
				t.Errorf("the right password from %s after its failures = %d, want 429", a.source, a.status)
			}
		}

		// One source, 20 at once: counted before the check.
		n401 := 0
		for _, a := range burst(20, func(int) string { return "127.0.4.1" }, wrong) {
			if a.status == 401 {
				n401++
			} else if a.status != 429 {
				t.Fatalf("concurrent wrong login answered %d", a.status)
			}
		}
		if n401 != 5 {
			t.Errorf("20 concurrent wrong logins from one source: %d checked, want exactly 5", n401)
		}

		// The account is flooded; a source that has not failed gets in.
		start := time.Now()
		if st, _ := loginFrom(fromSource(t, f, "127.0.5.1"), f.API, email, password); st != 200 {
			t.Fatalf("the right password from a fresh source after the flood = %d, want 200", st)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the flooded account answered after %v: the delay is not bounded", d)
		}

		// Only JSON: a page can send text/plain (or no type) cross-site.
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
			req, _ := http.NewRequest("POST", "https://"+f.API+"/v1/auth/login", strings.NewReader(fmt.Sprintf(`{"email":%q,"password":%q}`, email, password)))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := fromSource(t, f, "127.0.6.1").Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 415 {
				t.Errorf("login with Content-Type %q = %d, want 415", ct, resp.StatusCode)
			}
		}
	})
}
