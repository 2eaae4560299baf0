// Package patronitest starts the PostgreSQL HA stack the seeds' clusters
// run, for failover tests (SPEC 18): one etcd (Debian's etcd-server) and
// two PostgreSQL 15 servers under Patroni (Debian's patroni) with
// synchronous replication, in a temp directory, on free loopback ports.
//
// Every process is stopped by PID, even when the test binary dies
// without running its cleanups: the PIDs are written to a file that the
// next Start reaps, a watchdog shell stops them when the test process is
// gone, and etcd and Patroni die with their parent (Pdeathsig). The
// postmasters, reparented to PID 1 when Patroni dies, are found by their
// data directory's postmaster.pid.
package patronitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"stratum/internal/freeport"
	"stratum/internal/pgtest"
)

// Scope is the Patroni cluster name.
const Scope = "stratum-test"

// Database and Role are what the founders use: a role that owns its
// database and nothing else, PUBLIC without CONNECT (docs/HA.md).
const (
	Database = "stratum"
	Role     = "stratum"
)

// Cluster is a running etcd and two Patroni nodes.
type Cluster struct {
	Dir      string
	EtcdPort int
	Nodes    []*Node
	// Password is the founders' role's; superuser is postgres's.
	Password  string
	superuser string
	as        *user.User // the user PostgreSQL runs as; nil for the current one
	t         testing.TB
	mu        sync.Mutex
	procs     []*exec.Cmd
}

// Node is one Patroni-managed PostgreSQL.
type Node struct {
	Name    string
	Dir     string
	PGPort  int
	APIPort int
	Config  string // its patroni.yml
	cmd     *exec.Cmd
}

// Available says why the stack cannot run here, or "".
func Available() string {
	if pgtest.Bin() == "" {
		return "PostgreSQL is not installed (Debian: apt-get install postgresql)"
	}
	for _, tool := range []string{"patroni", "patronictl", "etcd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (Debian: apt-get install patroni etcd-server)"
		}
	}
	return ""
}

// Start brings the stack up and waits until the primary accepts writes
// and the synchronous standby streams; the test is skipped, saying so,
// only when the packages are absent. It is stopped when the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why + "; the Patroni failover test does not run here")
	}
	reapStale()
	dir, err := os.MkdirTemp("", "stratum-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Password: secret(), superuser: secret(), t: t}
	t.Cleanup(c.Stop)
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		if c.as, err = user.Lookup("postgres"); err != nil {
			t.Fatalf("running as root needs the postgres user: %v", err)
		}
	}
	c.watchdog()
	if err := c.startEtcd(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"n1", "n2"} {
		n := &Node{Name: name, Dir: filepath.Join(dir, name), PGPort: freeport.Must(t, "127.0.0.1"), APIPort: freeport.Must(t, "127.0.0.1")}
		if err := c.writeConfig(n); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	// n1 first, so it bootstraps the cluster and n2 clones it.
	if err := c.startPatroni(c.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPrimary(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.startPatroni(c.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSyncStreaming(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.createDatabase(); err != nil {
		t.Fatal(err)
	}
	return c
}

func secret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DSN is the founders' multi-host DSN: every node, the writable one
// chosen at each connect.
func (c *Cluster) DSN() string {
	var hosts []string
	for _, n := range c.Nodes {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", n.PGPort))
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		Role, c.Password, strings.Join(hosts, ","), Database)
}

// superDSN reaches one node as the superuser.
func (c *Cluster) superDSN(n *Node, db string) string {
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=3", c.superuser, n.PGPort, db)
}

// pidsFile lists what this test process started, for reapStale.
func pidsDir() string { return filepath.Join(os.TempDir(), "stratum-patronitest") }

func (c *Cluster) record(cmd *exec.Cmd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, cmd)
	var b strings.Builder
	fmt.Fprintf(&b, "dir %s\n", c.Dir)
	for _, p := range c.procs {
		fmt.Fprintf(&b, "pid %d\n", p.Process.Pid)
	}
	_ = os.MkdirAll(pidsDir(), 0o700)
	_ = os.WriteFile(filepath.Join(pidsDir(), strconv.Itoa(os.Getpid())), []byte(b.String()), 0o600)
}

// reapStale stops what an earlier test process that died left running:
// its etcd and Patroni by PID, its postmasters by their postmaster.pid,
// and removes its directory.
func reapStale() {
	entries, _ := os.ReadDir(pidsDir())
	for _, e := range entries {
		owner, err := strconv.Atoi(e.Name())
		if err != nil || owner == os.Getpid() || syscall.Kill(owner, 0) == nil {
			continue // still alive (another test binary running now)
		}
		path := filepath.Join(pidsDir(), e.Name())
		raw, _ := os.ReadFile(path)
		var dir string
		for _, line := range strings.Split(string(raw), "\n") {
			kind, v, _ := strings.Cut(line, " ")
			switch kind {
			case "pid":
				if pid, err := strconv.Atoi(v); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			case "dir":
				dir = v
			}
		}
		if dir != "" && strings.HasPrefix(dir, filepath.Join(os.TempDir(), "stratum-patroni-")) {
			killPostmasters(dir)
			os.RemoveAll(dir)
		}
		os.Remove(path)
	}
}

// killPostmasters kills every postmaster whose data directory is under dir.
func killPostmasters(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "data", "postmaster.pid"))
	for _, m := range matches {
		if pid := postmasterPID(filepath.Dir(m)); pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func postmasterPID(dataDir string) int {
	raw, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// watchdog stops everything once this test process is gone, however it
// ended (a test binary killed by -timeout runs no cleanup).
func (c *Cluster) watchdog() {
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done
for f in %s/*/data/postmaster.pid; do [ -f "$f" ] && kill -9 "$(head -1 "$f")" 2>/dev/null; done
pf=%s/%d; [ -f "$pf" ] && for p in $(sed -n 's/^pid //p' "$pf"); do kill -9 "$p" 2>/dev/null; done
sleep 1; rm -rf %s "$pf"`, os.Getpid(), c.Dir, pidsDir(), os.Getpid(), c.Dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go cmd.Wait()
	}
}

func (c *Cluster) spawn(name string, logFile string, argv ...string) (*exec.Cmd, error) {
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); log.Close() }()
	c.record(cmd)
	return cmd, nil
}

func (c *Cluster) startEtcd() error {
	c.EtcdPort = freeport.Must(c.t, "127.0.0.1")
	peer := freeport.Must(c.t, "127.0.0.1")
	client := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	_, err := c.spawn("etcd", filepath.Join(c.Dir, "etcd.log"), "etcd", "--name", "e0", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e0="+peerURL, "--initial-cluster-state", "new")
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(client + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("etcd did not answer /health within 30 s: %s", c.tail("etcd.log"))
}

// config is the patroni.yml of one node with this run's ports,
// directories and passwords.
func (c *Cluster) config(n *Node) string {
	return renderConfig(n.Name, n.APIPort, c.EtcdPort, n.PGPort, n.Dir, pgtest.Bin(), c.superuser)
}

// ExampleConfig is the configuration docs/HA.md shows: the tests' own,
// rendered with a site's ports, directories and password placeholders.
func ExampleConfig() string {
	return renderConfig("pg1", 8008, 2379, 5432, "/var/lib/patroni/pg1", "/usr/lib/postgresql/15/bin", "SECRET")
}

func renderConfig(name string, apiPort, etcdPort, pgPort int, dir, bin, password string) string {
	return fmt.Sprintf(`scope: %s
name: %s
restapi:
  listen: 127.0.0.1:%d
  connect_address: 127.0.0.1:%d
etcd3:
  hosts: 127.0.0.1:%d
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    primary_start_timeout: 0
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 128MB
        wal_retrieve_retry_interval: 1s
        max_connections: 100
  initdb:
    - encoding: UTF8
    - locale: C
    - no-sync
postgresql:
  listen: 127.0.0.1:%d
  connect_address: 127.0.0.1:%d
  data_dir: %s
  bin_dir: %s
  pgpass: %s
  authentication:
    superuser:
      username: postgres
      password: %s
    replication:
      username: replicator
      password: %s
    rewind:
      username: rewinder
      password: %s
  parameters:
    unix_socket_directories: %s
  pg_hba:
    - local all all scram-sha-256
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
`, Scope, name, apiPort, apiPort, etcdPort, pgPort, pgPort,
		filepath.Join(dir, "data"), bin, filepath.Join(dir, "pgpass"),
		password, password, password, dir)
}

func (c *Cluster) writeConfig(n *Node) error {
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return err
	}
	n.Config = filepath.Join(n.Dir, "patroni.yml")
	if err := os.WriteFile(n.Config, []byte(c.config(n)), 0o600); err != nil {
		return err
	}
	if c.as != nil {
		uid, _ := strconv.Atoi(c.as.Uid)
		gid, _ := strconv.Atoi(c.as.Gid)
		for _, p := range []string{c.Dir, n.Dir, n.Config} {
			if err := os.Chown(p, uid, gid); err != nil {
				return err
			}
		}
		if err := os.Chmod(c.Dir, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startPatroni(n *Node) error {
	argv := []string{"patroni", n.Config}
	if c.as != nil {
		argv = append([]string{"setpriv", "--reuid=" + c.as.Uid, "--regid=" + c.as.Gid, "--init-groups", "/usr/bin/patroni"}, n.Config)
	}
	cmd, err := c.spawn("patroni "+n.Name, filepath.Join(c.Dir, n.Name+".log"), argv...)
	n.cmd = cmd
	return err
}

// member is one row of Patroni's GET /cluster.
type member struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	State string `json:"state"`
	Port  int    `json:"port"`
}

// Members asks any node's REST API for the cluster view.
func (c *Cluster) Members() ([]member, error) {
	var last error
	for _, n := range c.Nodes {
		cl := http.Client{Timeout: 2 * time.Second}
		resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/cluster", n.APIPort))
		if err != nil {
			last = err
			continue
		}
		var v struct{ Members []member }
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err == nil {
			return v.Members, nil
		}
		last = err
	}
	return nil, last
}

// Primary is the node Patroni calls leader and that runs, or nil.
func (c *Cluster) Primary() *Node {
	ms, _ := c.Members()
	for _, m := range ms {
		if m.Role == "leader" && m.State == "running" {
			return c.node(m.Name)
		}
	}
	return nil
}

func (c *Cluster) node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitPrimary waits for a running leader that accepts a write.
func (c *Cluster) WaitPrimary(within time.Duration) (*Node, error) {
	deadline := time.Now().Add(within)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if p := c.Primary(); p != nil {
			if err := c.superExec(p, "postgres", "SELECT 1 WHERE NOT pg_is_in_recovery()"); err == nil {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("no primary within %v: %s", within, c.Describe())
}

// WaitSyncStreaming waits until the cluster may lose its primary without
// losing a commit: a member is sync_standby and running in Patroni's view,
// and the primary's pg_stat_replication shows it streaming, sync (the
// standby's own /sync can answer from stale state).
func (c *Cluster) WaitSyncStreaming(within time.Duration) error {
	deadline := time.Now().Add(within)
	for ; time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		ms, err := c.Members()
		if err != nil {
			continue
		}
		var leader *Node
		sync := false
		for _, m := range ms {
			switch {
			case m.Role == "leader" && m.State == "running":
				leader = c.node(m.Name)
			case m.Role == "sync_standby" && (m.State == "running" || m.State == "streaming"):
				sync = true
			}
		}
		if leader == nil || !sync {
			continue
		}
		var n int
		if err := c.superQuery(leader, "postgres", "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'", &n); err == nil && n > 0 {
			return nil
		}
	}
	return fmt.Errorf("no synchronous standby streaming within %v: %s", within, c.Describe())
}

// Describe is the cluster view and the end of each log, for failures.
func (c *Cluster) Describe() string {
	ms, err := c.Members()
	out := fmt.Sprintf("members %+v (%v)", ms, err)
	for _, n := range c.Nodes {
		out += "\n--- " + n.Name + ".log\n" + c.tail(n.Name+".log")
	}
	return out
}

func (c *Cluster) tail(name string) string {
	raw, _ := os.ReadFile(filepath.Join(c.Dir, name))
	if len(raw) > 3000 {
		raw = raw[len(raw)-3000:]
	}
	return string(raw)
}

func (c *Cluster) superExec(n *Node, db, sql string) error {
	var ignored any
	err := c.superQuery(n, db, sql, &ignored)
	if errors.Is(err, pgx.ErrNoRows) {
		return errors.New("no row")
	}
	return err
}

func (c *Cluster) superQuery(n *Node, db, sql string, dst any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.superDSN(n, db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dst)
}

// createDatabase makes the founders' role and database as docs/HA.md
// says: the role owns the database; PUBLIC may not connect.
func (c *Cluster) createDatabase() error {
	p := c.Primary()
	if p == nil {
		return errors.New("no primary to create the database on")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.superDSN(p, "postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", Role, c.Password),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", Database, Role),
		fmt.Sprintf("REVOKE CONNECT, TEMPORARY ON DATABASE %s FROM PUBLIC", Database),
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(sql)[0]+" "+strings.Fields(sql)[1], err)
		}
	}
	return nil
}

// Switchover asks Patroni to move the leader to the other node (the
// planned failover of an operator) and returns the new primary's name.
func (c *Cluster) Switchover() (string, error) {
	from := c.Primary()
	if from == nil {
		return "", errors.New("no primary to switch over from")
	}
	var to *Node
	for _, n := range c.Nodes {
		if n != from {
			to = n
		}
	}
	cmd := exec.Command("patronictl", "-c", from.Config, "switchover", "--leader", from.Name, "--candidate", to.Name, "--force")
	cmd.Dir = c.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("patronictl switchover: %v: %s", err, out)
	}
	return to.Name, nil
}

// KillPrimaryPostmaster SIGKILLs the primary's postmaster (Patroni lives
// on and, with primary_start_timeout 0, fails over to the synchronous
// standby instead of restarting it in place). It returns the PID killed.
func (c *Cluster) KillPrimaryPostmaster() (string, int, error) {
	p := c.Primary()
	if p == nil {
		return "", 0, errors.New("no primary to kill")
	}
	pid := postmasterPID(filepath.Join(p.Dir, "data"))
	if pid <= 1 {
		return "", 0, fmt.Errorf("no postmaster.pid in %s", p.Dir)
	}
	return p.Name, pid, syscall.Kill(pid, syscall.SIGKILL)
}

// Stop kills Patroni, etcd and the postmasters and removes the directory.
func (c *Cluster) Stop() {
	if c.t != nil && c.t.Failed() {
		c.t.Logf("Patroni cluster at failure: %s", c.Describe())
	}
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	// Patroni first, so it restarts no postmaster; then the postmasters.
	for i := len(procs) - 1; i >= 0; i-- {
		_ = syscall.Kill(-procs[i].Process.Pid, syscall.SIGKILL)
		_ = procs[i].Process.Kill()
	}
	killPostmasters(c.Dir)
	time.Sleep(200 * time.Millisecond)
	os.RemoveAll(c.Dir)
	os.Remove(filepath.Join(pidsDir(), strconv.Itoa(os.Getpid())))
}
