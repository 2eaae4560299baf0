package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
)

// TestHAFoundersOnOneDatabase is SPEC section 13's proof with real
// processes: three founders on one PostgreSQL database. A joiner
// registered through B long-polls C and is woken by an approval on A; A is
// SIGKILLed in the middle of a stream of writes and every acknowledged
// write is readable through B.
func TestHAFoundersOnOneDatabase(t *testing.T) {
	dsn := pgtest.DSN(t)
	root := t.TempDir()
	dirs := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		dirs[n] = filepath.Join(root, n)
	}
	a := stratumtest.ServeDev(t, dirs["a"], "--store", dsn)
	if _, err := os.Stat(filepath.Join(dirs["a"], "stratum.db")); err == nil {
		t.Fatal("a founder on a database wrote a bbolt file")
	}
	b, c := a.Replica(t, dirs["b"], dsn), a.Replica(t, dirs["c"], dsn)
	caA, _ := os.ReadFile(filepath.Join(dirs["a"], "ca.pem"))
	for _, n := range []string{"b", "c"} {
		if ca, _ := os.ReadFile(filepath.Join(dirs[n], "ca.pem")); string(ca) != string(caA) {
			t.Fatalf("replica %s wrote a ca.pem other than the cluster's", n)
		}
	}

	// stratum backup writes bbolt snapshots only: asked of a replica, it
	// says what to use instead and leaves no file.
	out := filepath.Join(root, "ha.bak")
	if r := stratum(t, "backup", "--data", dirs["a"], "--out", out); r.code == 0 || !strings.Contains(r.stderr, "pg_dump") {
		t.Fatalf("backup of a replica = %d %q %q, want a refusal naming pg_dump", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused backup left a file")
	}

	// A login session made on A works on B and C.
	email, password := credentials(t, dirs["a"])
	admin := a.Login(t, email, password).Token
	for name, f := range map[string]*stratumtest.Founder{"b": b, "c": c} {
		if status, body, err := call(f, "GET", "/v1/iam/tokens", admin, nil); err != nil || status != 200 {
			t.Fatalf("A's session on %s: %d %s %v", name, status, body, err)
		}
	}

	// Register through B, wait on C, approve on A.
	token := workerToken(t, a, admin)
	j := newJoinerClient(t, filepath.Join(dirs["a"], "ca.pem"))
	status, body := j.do(t, "POST", "https://"+b.Join+"/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "hostname": "lab-12", "mgmtIp": "192.0.2.12"})
	var reg struct {
		JoinID string `json:"joinId"`
		State  string `json:"state"`
	}
	if err := json.Unmarshal(body, &reg); status != 201 || err != nil || reg.State != "pending" {
		t.Fatalf("register through B: %d %s", status, body)
	}
	woken := make(chan time.Time, 1)
	go func() {
		st, body := j.do(t, "GET", "https://"+c.Join+"/v1/join/registrations/"+reg.JoinID+"?wait=30&state=pending", nil)
		var v struct{ State string }
		_ = json.Unmarshal(body, &v)
		// Approved, and with the turn free already delivering; the body
		// then carries secrets, so only the state is reported.
		if st != 200 || (v.State != "approved" && v.State != "delivering") {
			t.Errorf("long-poll on C answered %d, state %q", st, v.State)
		}
		woken <- time.Now()
	}()
	time.Sleep(500 * time.Millisecond) // the poll is waiting on C
	select {
	case <-woken:
		t.Fatal("the long-poll on C answered before the approval")
	default:
	}
	if status, body, err := call(a, "POST", "/v1/admin/join/registrations/"+reg.JoinID+"/approve", admin, map[string]any{}); err != nil || status != 200 {
		t.Fatalf("approve on A: %d %s %v", status, body, err)
	}
	approved := time.Now()
	select {
	case at := <-woken:
		t.Logf("approval on A woke the waiter on C after %v", at.Sub(approved))
		if at.Sub(approved) > time.Second {
			t.Errorf("the waiter on C was woken %v after the approval on A, want within a second", at.Sub(approved))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter on C was not woken by the approval on A")
	}

	// SIGKILL A in a stream of writes (token creations and approvals);
	// every acknowledged one is on B. The joins to approve registered
	// through B first; the first join holds the delivery turn, so each
	// approval queues.
	const toApprove = 15
	var pendingIDs []string
	for i := range toApprove {
		jc := newJoinerClient(t, filepath.Join(dirs["a"], "ca.pem"))
		status, body := jc.do(t, "POST", "https://"+b.Join+"/v1/join/registrations", map[string]any{"token": workerToken(t, a, admin), "release": "0.1.0",
			"hostname": fmt.Sprintf("lab-k%d", i), "mgmtIp": fmt.Sprintf("192.0.2.%d", 100+i)})
		var r struct {
			JoinID string `json:"joinId"`
		}
		if err := json.Unmarshal(body, &r); status != 201 || err != nil {
			t.Fatalf("register %d through B: %d %s", i, status, body)
		}
		pendingIDs = append(pendingIDs, r.JoinID)
	}
	var mu sync.Mutex
	var acked, approvedAcked []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, id := range pendingIDs {
			status, _, err := call(a, "POST", "/v1/admin/join/registrations/"+id+"/approve", admin, map[string]any{})
			if err != nil || status != 200 {
				return // A is gone
			}
			mu.Lock()
			approvedAcked = append(approvedAcked, id)
			mu.Unlock()
		}
	}()
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				tok, status, err := createToken(a, admin, fmt.Sprintf("stream-%d-%d", w, i))
				if err != nil || status != 201 {
					return // A is gone
				}
				mu.Lock()
				acked = append(acked, tok.ID)
				mu.Unlock()
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		mu.Lock()
		n += len(approvedAcked)
		mu.Unlock()
		if n >= 30 || time.Now().After(deadline) {
			break
		}
	}
	a.Stop(syscall.SIGKILL, 10*time.Second)
	wg.Wait()
	if len(acked) < 10 {
		t.Fatalf("only %d writes acknowledged before the kill", len(acked))
	}
	onB := tokenIDs(t, b, admin)
	var lost []string
	for _, id := range acked {
		if !onB[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes on A are not readable through B: %v", len(lost), len(acked), lost)
	}
	t.Logf("%d writes acknowledged by A before SIGKILL, all readable through B", len(acked))
	// Every acknowledged approval is an approved join on B; clear them out
	// of the queue (rejected) so the failover join below gets the turn.
	for _, id := range approvedAcked {
		status, body, err := call(b, "GET", "/v1/admin/join/registrations/"+id, admin, nil)
		var v struct{ State string }
		if err != nil || status != 200 || json.Unmarshal(body, &v) != nil || v.State != "approved" {
			t.Fatalf("approval of %s acknowledged by A before SIGKILL; through B: %d %s %v", id, status, body, err)
		}
		if status, body, err := call(b, "POST", "/v1/admin/join/registrations/"+id+"/reject", admin, map[string]any{"reason": "test"}); err != nil || status != 200 {
			t.Fatalf("reject %s on B: %d %s %v", id, status, body, err)
		}
	}
	t.Logf("%d approvals acknowledged by A before SIGKILL, all approved through B", len(approvedAcked))
	for _, id := range pendingIDs[len(approvedAcked):] {
		// Approved by a write A never acknowledged, or still pending: either
		// is consistent. Rejecting it keeps the queue free.
		_, _, _ = call(b, "POST", "/v1/admin/join/registrations/"+id+"/reject", admin, map[string]any{"reason": "test"})
	}

	// B and C keep serving writes, and the chain is whole.
	if _, status, err := createToken(b, admin, "after-kill"); err != nil || status != 201 {
		t.Fatalf("write through B after A died: %d %v", status, err)
	}

	// A real joiner given A (dead) and B finishes its join through B. The
	// first registration holds the delivery turn: cancel it first.
	if status, body, err := call(b, "POST", "/v1/admin/join/registrations/"+reg.JoinID+"/cancel", admin, map[string]any{"reason": "test"}); err != nil || status != 200 {
		t.Fatalf("cancel on B: %d %s %v", status, body, err)
	}
	joinThroughFailover(t, a, b, admin, filepath.Join(dirs["b"], "ca.pem"))

	if r := stratum(t, "audit", "verify", "--data", dirs["b"], "--store", dsn); r.code != 0 || !strings.Contains(r.stdout, "intact") {
		t.Fatalf("audit verify on the database: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// workerToken creates a one-use worker join token through f.
func workerToken(t testing.TB, f *stratumtest.Founder, admin string) string {
	t.Helper()
	status, body, err := call(f, "POST", "/v1/admin/join/tokens", admin, map[string]any{"role": "worker", "ttl": "1h", "uses": 1})
	var jt struct {
		Token string `json:"token"`
	}
	if err != nil || status != 201 || json.Unmarshal(body, &jt) != nil || jt.Token == "" {
		t.Fatalf("join token on %s: %d %s %v", f.API, status, body, err)
	}
	return jt.Token
}

// joinThroughFailover runs `stratum join --founder DEAD,LIVE` and approves
// its registration on live; the joiner must move past the dead founder and
// end joined.
func joinThroughFailover(t *testing.T, dead, live *stratumtest.Founder, admin, caFile string) {
	t.Helper()
	_, out, exited := startJoiner(t, dead, live, workerToken(t, live, admin), caFile, "lab-13", "192.0.2.13")
	approved := false
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			if err != nil || !strings.Contains(out.String(), "state: joined") {
				t.Fatalf("the joiner ended with %v:\n%s", err, out)
			}
			if !strings.Contains(out.String(), "trying the founder at "+live.Join) {
				t.Errorf("the joiner did not say it moved to B:\n%s", out)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the joiner did not finish within 40s:\n%s", out)
		}
		if approved {
			continue
		}
		status, body, err := call(live, "GET", "/v1/admin/join/registrations?state=pending", admin, nil)
		if err != nil || status != 200 {
			continue
		}
		var list struct {
			Registrations []struct {
				JoinID string `json:"joinId"`
			} `json:"registrations"`
		}
		if json.Unmarshal(body, &list) != nil || len(list.Registrations) == 0 {
			continue
		}
		id := list.Registrations[0].JoinID
		if status, body, err := call(live, "POST", "/v1/admin/join/registrations/"+id+"/approve", admin, map[string]any{}); err != nil || status != 200 {
			t.Fatalf("approve on B: %d %s %v", status, body, err)
		}
		approved = true
	}
}

// TestStoreUnreachableAtStart: a DSN that cannot be reached is a clear
// error naming the host, never the password.
func TestStoreUnreachableAtStart(t *testing.T) {
	r := stratum(t, "serve", "--dev", "--data", t.TempDir(), "--store", "postgres://stratum:pw-never-shown@127.0.0.1:1/stratum?connect_timeout=2")
	if r.code == 0 || !strings.Contains(r.stderr, "127.0.0.1:1") || strings.Contains(r.stderr+r.stdout, "pw-never-shown") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// joinerClient presents a self-signed ed25519 certificate, as `stratum
// join` does, and trusts the cluster CA.
type joinerClient struct{ c *http.Client }

func newJoinerClient(t *testing.T, caFile string) *joinerClient {
	t.Helper()
	key := stratumtest.NewJoinerKey(t)
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{key.Cert}}}
	t.Cleanup(tr.CloseIdleConnections)
	return &joinerClient{c: &http.Client{Timeout: 60 * time.Second, Transport: tr}}
}

// do sends body (JSON) to url and returns the status and the answer; no
// answer is an error of the test.
func (j *joinerClient) do(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	status, raw, err := j.send(method, url, body)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
	}
	return status, raw
}

// try is do without failing the test: a refused or failed request is an
// answer of a stream, status 0 for no answer.
func (j *joinerClient) try(method, url string, body any) (int, []byte) {
	status, raw, _ := j.send(method, url, body)
	return status, raw
}

func (j *joinerClient) send(method, url string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := j.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, nil
}

// TestMigrateIntoPostgres: a bbolt founder, stopped, is copied into an
// empty database and serves from it with every record; a second migrate
// into the same database is refused.
func TestMigrateIntoPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)
	admin := f.Login(t, email, password).Token
	var ids []string
	for i := 0; i < 5; i++ {
		tok, status, err := createToken(f, admin, fmt.Sprintf("before-%d", i))
		if err != nil || status != 201 {
			t.Fatalf("create token: %d %v", status, err)
		}
		ids = append(ids, tok.ID)
	}
	if code, _ := f.Stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("founder exited %d", code)
	}
	r := stratum(t, "migrate", "--data", dir, "--to", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "audit chain intact") {
		t.Fatalf("migrate: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := stratum(t, "migrate", "--data", dir, "--to", dsn); r.code == 0 || !strings.Contains(r.stderr, "not empty") {
		t.Fatalf("a second migrate into the same database: %d %s", r.code, r.stderr)
	}
	g := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dir, Args: []string{"--store", dsn}})
	admin = g.Login(t, email, password).Token
	have := tokenIDs(t, g, admin)
	for _, id := range ids {
		if !have[id] {
			t.Errorf("token %s did not survive the migration", id)
		}
	}
}
