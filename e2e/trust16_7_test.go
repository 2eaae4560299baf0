package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
)

// SPEC 16.7: PostgreSQL as a shared neighbour. Each test performs the
// attack of issue 20 item 6 against the real binary on a real PostgreSQL,
// as a second role of the same server that owns nothing of the cluster's.

// The lock ids the first builds used; any role could take them.
const (
	oldWriterLock int64 = 0x5354524154554d01
	oldLeaseLock  int64 = 0x5354524154554d02
)

// TestTrust16_7_PublicConnectRefused: on a database every role may connect
// to (PostgreSQL's default) the founder refuses to start and prints the
// statement that fixes it; --allow-public-connect starts with a warning;
// once the statement ran, it starts without.
func TestTrust16_7_PublicConnectRefused(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.PublicDatabase(t)
	name := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	dir := filepath.Join(t.TempDir(), "a")
	revoke := fmt.Sprintf(`REVOKE CONNECT ON DATABASE "%s" FROM PUBLIC;`, name)

	r := stratum(t, "serve", "--dev", "--data", dir, "--store", dsn, "--api-addr", "127.0.0.1:0", "--join-addr", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, revoke) {
		t.Fatalf("serve on a database PUBLIC may connect to: exit %d, stderr %q; want a refusal naming %s", r.code, r.stderr, revoke)
	}

	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dir, Args: []string{"--store", dsn, "--allow-public-connect"}})
	if out := f.Stdout(); !strings.Contains(out, "WARNING") || !strings.Contains(out, revoke) {
		t.Fatalf("--allow-public-connect started without the warning naming %s:\n%s", revoke, out)
	}
	f.Stop(syscall.SIGTERM, 20*time.Second)

	if err := srv.Exec(revoke); err != nil {
		t.Fatal(err)
	}
	f = stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dir, Args: []string{"--store", dsn}})
	if strings.Contains(f.Stdout(), "WARNING") {
		t.Fatalf("a warning after the revoke:\n%s", f.Stdout())
	}
}

// neighbour is a session of a role that may connect to the cluster's
// database and nothing more.
func neighbour(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t).Neighbour(t, dsn))
	if err != nil {
		t.Fatalf("the neighbour role connects: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func pidOf(t *testing.T, conn *pgx.Conn) int {
	var pid int
	if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// readyz is the founder's /readyz: its status and the pids it names.
func readyz(t testing.TB, f *stratumtest.Founder) (string, map[string]int) {
	t.Helper()
	status, body, err := call(f, "GET", "/readyz", "", nil)
	var v struct {
		Status   string `json:"status"`
		Problems []struct {
			Lock    string `json:"lock"`
			PID     int    `json:"pid"`
			Message string `json:"message"`
		} `json:"problems"`
	}
	if err != nil || status != 200 || json.Unmarshal(body, &v) != nil {
		t.Fatalf("/readyz: %d %s %v", status, body, err)
	}
	pids := map[string]int{}
	for _, p := range v.Problems {
		pids[p.Lock] = p.PID
		if !strings.Contains(p.Message, fmt.Sprint(p.PID)) {
			t.Errorf("/readyz problem without the holder's pid: %+v", p)
		}
	}
	return v.Status, pids
}

// waitHolder waits until /readyz is degraded naming pid as the holder of
// lock ("" with pid 0: until it is ready).
func waitHolder(t testing.TB, f *stratumtest.Founder, lock string, pid int, within time.Duration) {
	t.Helper()
	var status string
	var pids map[string]int
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		status, pids = readyz(t, f)
		if lock == "" && status == "ready" || lock != "" && status == "degraded" && pids[lock] == pid {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz stayed %q %v for %v, want %s held by pid %d", status, pids, within, lock, pid)
		}
	}
}

// metric reads one unlabelled value from /metrics.
func metric(t testing.TB, f *stratumtest.Founder, name string) string {
	t.Helper()
	_, body, err := call(f, "GET", "/metrics", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	return string(m[1])
}

// TestTrust16_7_NeighbourLocks: a neighbour holding the lock ids every
// earlier build used stalls nothing (the ids derive from the cluster's
// data key); a neighbour that learns the real ids from pg_locks and takes
// the lease and then the writer lock is reported by the log, the metric
// and /readyz with its pid, and writes go on once it lets go.
func TestTrust16_7_NeighbourLocks(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := filepath.Join(t.TempDir(), "a")
	a := stratumtest.ServeDev(t, dir, "--store", dsn)
	email, password := credentials(t, dir)
	admin := a.Login(t, email, password).Token
	n := neighbour(t, dsn)
	ctx := context.Background()

	// The fixed ids of the first builds: held by the neighbour, founder
	// writes go on.
	if _, err := n.Exec(ctx, "SELECT pg_advisory_lock($1), pg_advisory_lock($2)", oldWriterLock, oldLeaseLock); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		if _, status, err := createToken(a, admin, fmt.Sprintf("fixed-%d", i)); err != nil || status != 201 {
			t.Fatalf("a write while a neighbour holds the old fixed lock ids: %d %v", status, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("a write took %v while a neighbour holds the old fixed lock ids", d)
		}
	}
	if s, _ := readyz(t, a); s != "ready" {
		t.Fatalf("/readyz %q while the neighbour holds ids that are not the cluster's", s)
	}

	// The neighbour reads the ids in use from pg_locks: the lease (held
	// all the time) and the writer lock (held during each write).
	advisory := func() map[int64]bool {
		rows, err := n.Query(ctx, `SELECT classid::bigint, objid::bigint FROM pg_locks
			WHERE locktype = 'advisory' AND objsubid = 1 AND pid <> pg_backend_pid()
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		ids := map[int64]bool{}
		for rows.Next() {
			var hi, lo int64
			if err := rows.Scan(&hi, &lo); err != nil {
				t.Fatal(err)
			}
			ids[int64(uint64(hi)<<32|uint64(lo))] = true
		}
		return ids
	}
	// The lease is the one id held in every sample (a background write
	// may show the writer lock in one).
	var held map[int64]bool
	for deadline := time.Now().Add(15 * time.Second); ; {
		held = advisory()
		for range 10 {
			time.Sleep(100 * time.Millisecond)
			now := advisory()
			for id := range held {
				if !now[id] {
					delete(held, id)
				}
			}
		}
		if len(held) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("advisory locks held all along: %v, want the lease alone", held)
		}
	}
	var lease int64
	for id := range held {
		lease = id
	}
	if lease == oldLeaseLock || lease == oldWriterLock {
		t.Fatalf("the lease id is the old fixed one %#x", lease)
	}
	var writer int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			_, _, _ = createToken(a, admin, fmt.Sprintf("spy-%d", i))
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); writer == 0; {
		for id := range advisory() {
			if id != lease {
				writer = id
			}
		}
		if time.Now().After(deadline) {
			stop.Store(true)
			t.Fatal("the writer lock never showed in pg_locks during writes")
		}
	}
	stop.Store(true)
	wg.Wait()

	// The lease: the neighbour takes it while no founder holds it (A
	// killed) and A, restarted, is degraded naming the neighbour's pid.
	a.Stop(syscall.SIGKILL, 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var got bool
		if err := n.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", lease).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed founder's lease never came free")
		}
	}
	a = stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dir, Args: []string{"--store", dsn}})
	pid := pidOf(t, n)
	waitHolder(t, a, "lease", pid, 10*time.Second)
	if v := metric(t, a, "stratum_store_foreign_lock_holders"); v != "1" {
		t.Errorf("stratum_store_foreign_lock_holders = %s, want 1", v)
	}
	// The log line may follow /readyz's report by a moment on a busy machine.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(a.Output(), fmt.Sprintf("pid=%d", pid)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the log does not name the lease holder's pid %d:\n%s", pid, a.OutputTail(4096))
			break
		}
	}
	if _, status, err := createToken(a, admin, "lease-held"); err != nil || status != 201 {
		t.Fatalf("a write while a neighbour holds the lease: %d %v", status, err)
	}

	// The writer lock: reported with the pid while held; writes go on
	// once the neighbour lets go.
	if _, err := n.Exec(ctx, "SELECT pg_advisory_lock($1)", writer); err != nil {
		t.Fatal(err)
	}
	waitHolder(t, a, "writer", pid, 10*time.Second)
	if _, err := n.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}
	if _, status, err := createToken(a, admin, "after"); err != nil || status != 201 {
		t.Fatalf("a write after the neighbour let go: %d %v", status, err)
	}
	waitHolder(t, a, "", 0, 10*time.Second) // A takes the lease back too
}

// TestTrust16_7_ForgedNoteFreezesNothing: two founder processes on one
// database, a joined node's agent recording every second. A neighbour
// sends notes on the founders' channel naming that node with the highest
// sequences there are; before, each founder kept the record it read then
// and ignored every later one until restarted. Both keep answering the
// agent's newer records.
func TestTrust16_7_ForgedNoteFreezesNothing(t *testing.T) {
	dsn := pgtest.DSN(t)
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "a"), filepath.Join(root, "b")
	a := stratumtest.ServeDev(t, dirA, "--store", dsn)
	b := a.Replica(t, dirB, dsn)
	email, password := credentials(t, dirA)
	admin := a.Login(t, email, password).Token
	nodeRoot, out, done := startJoiner(t, a, b, workerToken(t, a, admin), filepath.Join(dirA, "ca.pem"), "note-node", "127.0.0.6")
	approveByHostname(t, a, admin, "note-node") // A runs --dev: a loopback node address is its lab's
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "state: joined") {
			t.Fatalf("the joiner ended with %v:\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the joiner did not end joined within 60 s:\n%s", out)
	}
	node := stratumtest.NodeID(t, nodeRoot)
	agentOut, _ := startAgent(t, a, b, nodeRoot, "127.0.0.6")
	for deadline := time.Now().Add(20 * time.Second); recordedAt(t, a, admin, node).IsZero() || recordedAt(t, b, admin, node).IsZero(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's record never showed on both founders:\n%s", agentOut)
		}
	}

	n := neighbour(t, dsn)
	for _, seq := range []string{"18446744073709551615", "9223372036854775807"} {
		if _, err := n.Exec(context.Background(), "SELECT pg_notify('stratum', $1)", "forged\nrelease-records\n"+node+" "+seq); err != nil {
			t.Fatal(err)
		}
	}
	forged := time.Now()
	for name, f := range map[string]*stratumtest.Founder{"A": a, "B": b} {
		for deadline := time.Now().Add(15 * time.Second); !recordedAt(t, f, admin, node).After(forged.Add(time.Second)); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("founder %s answers the record of %v for %s, none after the forged note at %v:\n%s", name, recordedAt(t, f, admin, node), node, forged, agentOut)
			}
		}
	}
}
