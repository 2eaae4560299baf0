// Package baotest runs a real server of OpenBao's HTTP API for tests:
// HashiCorp Vault's dev server (OpenBao is a fork of Vault 1.14 and keeps
// the endpoints stratum uses). No OpenBao build can be installed here;
// Vault is built once by .ci/build-vault.sh into a cache outside the
// repository. Vault is under the BUSL: it is a test server only, never
// linked into or shipped with stratum.
//
// Each Start runs `vault server -dev` on a free loopback port with a root
// token of its own, in memory, and stops it when the test ends.
package baotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"stratum/internal/freeport"
	"stratum/internal/syncbuf"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Version is the Vault release .ci/build-vault.sh builds.
const Version = "1.21.4"

// Bin is the server binary: $STRATUM_VAULT_BIN, else the cache
// .ci/build-vault.sh fills ($STRATUM_TEST_CACHE, default
// /var/cache/stratum-test); "" when neither exists.
func Bin() string {
	if p := os.Getenv("STRATUM_VAULT_BIN"); p != "" {
		if isExec(p) {
			return p
		}
		return ""
	}
	cache := os.Getenv("STRATUM_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/stratum-test"
	}
	p := filepath.Join(cache, "vault-"+Version, "vault")
	if isExec(p) {
		return p
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Server is one running dev server.
type Server struct {
	// Addr is its base URL, http://127.0.0.1:PORT.
	Addr string
	// RootToken is its root token.
	RootToken string
	cmd       *exec.Cmd
	out       syncbuf.Buffer
	exited    chan struct{}
}

// Start runs a dev server for t, or skips t when the binary is absent.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin()
	if bin == "" {
		t.Skipf("no OpenBao-API test server: HashiCorp Vault %s is not built (run .ci/build-vault.sh, or set STRATUM_VAULT_BIN)", Version)
	}
	s, err := start(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func start(bin string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken between probe and bind
		port, err := freeport.Pick("127.0.0.1")
		if err != nil {
			return nil, err
		}
		root := make([]byte, 16)
		_, _ = rand.Read(root)
		s := &Server{exited: make(chan struct{}), Addr: "http://127.0.0.1:" + strconv.Itoa(port), RootToken: "root-" + hex.EncodeToString(root)}
		home, err := os.MkdirTemp("", "stratum-vault-")
		if err != nil {
			return nil, err
		}
		// The root token is a test secret of a throwaway in-memory server.
		s.cmd = exec.Command(bin, "server", "-dev", "-dev-listen-address=127.0.0.1:"+strconv.Itoa(port), "-dev-root-token-id="+s.RootToken, "-dev-no-store-token")
		s.cmd.Env = append(os.Environ(), "HOME="+home, "VAULT_DISABLE_MLOCK=true", "VAULT_ADDR=", "VAULT_TOKEN=")
		s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
		// The server dies with the test process, whatever ends it.
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(home)
			return nil, err
		}
		go func() { _ = s.cmd.Wait(); os.RemoveAll(home); close(s.exited) }()
		if lastErr = s.waitReady(60 * time.Second); lastErr == nil {
			return s, nil
		}
		s.Stop()
	}
	return nil, lastErr
}

// waitReady polls sys/health until the server is unsealed and active.
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("vault dev server exited:\n%s", s.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Addr+"/v1/sys/health", nil)
		resp, err := c.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("vault dev server at %s not ready within %v:\n%s", s.Addr, limit, s.out.String())
}

// Stop kills the server (in memory: nothing to keep).
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}

// WriteRootToken writes the root token to a 0600 file in dir and returns
// its path.
func (s *Server) WriteRootToken(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "openbao-root.token")
	if err := os.WriteFile(p, []byte(s.RootToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
