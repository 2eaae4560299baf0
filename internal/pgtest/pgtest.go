// Package pgtest starts a real PostgreSQL server for tests of the
// PostgreSQL store backend: Debian's binaries, initdb and pg_ctl in a temp
// directory, run as the unprivileged postgres user when the tests run as
// root, on a free loopback port. One server per test binary; each caller
// gets a database of its own.
//
// A package using it calls Main from its TestMain so the server is
// stopped when the tests end.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running PostgreSQL.
type Server struct {
	dir  string
	bin  string
	port int
	as   string // the user the server runs as; "" for the current one
}

var (
	once    sync.Once
	shared  *Server
	failure error
	dbs     atomic.Int64
)

// Bin finds the directory of initdb and pg_ctl, or "".
func Bin() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p)
		}
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

// Main runs the tests and stops the server if one was started.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// DSN returns the DSN of a fresh, empty database, skipping the test with
// a clear message when the PostgreSQL binaries are not installed.
func DSN(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	return s.NewDatabase(t)
}

// Shared returns this test binary's server, starting it on first use.
func Shared(t testing.TB) *Server {
	t.Helper()
	if Bin() == "" {
		t.Skip("PostgreSQL is not installed (Debian: apt-get install postgresql); the PostgreSQL backend is not tested here")
	}
	once.Do(func() { shared, failure = Start() })
	if failure != nil {
		t.Fatalf("starting PostgreSQL: %v", failure)
	}
	return shared
}

// Start initializes and starts a server in a new temp directory.
func Start() (*Server, error) {
	bin := Bin()
	dir, err := os.MkdirTemp("", "stratum-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		s.as = "postgres"
		u, err := user.Lookup(s.as)
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale", "C"); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if err := s.Resume(); err != nil {
		return nil, err
	}
	s.watchdog()
	return s, nil
}

func (s *Server) run(tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, tool), args...)
	if s.as != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.as, "--", filepath.Join(s.bin, tool)}, args...)...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a DSN for database name.
func (s *Server) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), name)
}

// NewDatabase creates an empty database and returns its DSN. PUBLIC may
// not connect to it, as docs/HA.md asks of a site (a founder refuses to
// start otherwise); PublicDatabase keeps PostgreSQL's default.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	dsn := s.PublicDatabase(t)
	name := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	if err := s.Exec("REVOKE CONNECT ON DATABASE " + name + " FROM PUBLIC"); err != nil {
		t.Fatalf("revoke connect: %v", err)
	}
	return dsn
}

// PublicDatabase creates an empty database any role may connect to
// (PostgreSQL's default) and returns its DSN.
func (s *Server) PublicDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	if err := s.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return s.URL(name)
}

// Neighbour creates a login role that neither owns nor may read the
// database of dsn but may connect to it (a monitoring role, say, or any
// role while PUBLIC may connect), and returns that role's DSN: the
// PostgreSQL neighbour of SPEC 16.7's attacks.
func (s *Server) Neighbour(t testing.TB, dsn string) string {
	t.Helper()
	name := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	role := fmt.Sprintf("neighbour%d_%d", os.Getpid(), dbs.Add(1))
	if err := s.Exec("CREATE ROLE " + role + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"); err != nil {
		t.Fatalf("create role: %v", err)
	}
	if err := s.Exec("GRANT CONNECT ON DATABASE " + name + " TO " + role); err != nil {
		t.Fatalf("grant connect: %v", err)
	}
	return strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1)
}

// Exec runs one statement as the superuser in the postgres database.
func (s *Server) Exec(sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Stop stops the server at once and removes its directory.
func (s *Server) Stop() {
	_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

// watchdog stops the server and removes its directory once this test
// process is gone, however it ended: a test binary killed by its -timeout
// runs no cleanup, and pg_ctl's server outlives it otherwise.
func (s *Server) watchdog() {
	stop := fmt.Sprintf("%s -D %s -m immediate -w stop", filepath.Join(s.bin, "pg_ctl"), filepath.Join(s.dir, "data"))
	if s.as != "" {
		stop = "runuser -u " + s.as + " -- " + stop
	}
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; %s >/dev/null 2>&1; rm -rf %s", os.Getpid(), stop, s.dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go cmd.Wait()
	}
}

// Halt stops the server (fast shutdown: sessions are cut) and keeps its
// data: a database failover as a founder sees it.
func (s *Server) Halt() error {
	out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Resume starts the server on its port.
func (s *Server) Resume() error {
	// fsync off: the tests kill founders, never the machine.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", s.port, s.dir)
	data := filepath.Join(s.dir, "data")
	out, err := s.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "start")
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v: %s %s", err, strings.TrimSpace(string(out)), log)
	}
	return nil
}
