package stratumtest

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"stratum/internal/syncbuf"
	"stratum/joiner"
	"stratum/wire"
)

// The harness's domain verbs: what a test does to a founder, said once.

// Login logs email in and returns a client of the admin API with the
// session.
func (f *Founder) Login(t testing.TB, email, password string) *Client {
	t.Helper()
	c := f.AdminClient()
	c.Token = c.Login(t, email, password)
	return c
}

// JoinToken creates a join token for role (one use, an hour) and returns
// its secret.
func (c *Client) JoinToken(t testing.TB, role string) string {
	t.Helper()
	return c.JoinTokenUses(t, role, 1)
}

// JoinTokenUses creates a join token for role good for uses
// registrations within an hour and returns its secret.
func (c *Client) JoinTokenUses(t testing.TB, role string, uses int) string {
	t.Helper()
	var out wire.JoinToken
	c.Must(t, "POST", "/v1/admin/join/tokens", wire.JoinTokenRequest{Role: role, TTL: "1h", Uses: uses}, http.StatusCreated, &out)
	if out.Token == "" {
		t.Fatal("the join token's creation answered no token")
	}
	return out.Token
}

// JoinerKey is a joiner's own key, made by the joiner's own code (an
// ed25519 key in a self-signed certificate); Pin is its fingerprint as the
// founder shows it.
type JoinerKey struct {
	Cert tls.Certificate
	Pin  string
}

// NewJoinerKey makes a joiner key or fails the test.
func NewJoinerKey(t testing.TB) *JoinerKey {
	t.Helper()
	k, err := MakeJoinerKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// MakeJoinerKey makes a joiner key, for code without a *testing.T (a
// soak's or a benchmark's many joiners).
func MakeJoinerKey() (*JoinerKey, error) {
	id, err := joiner.NewIdentity()
	if err != nil {
		return nil, err
	}
	cert, err := id.ClientCertificate(time.Now())
	if err != nil {
		return nil, err
	}
	return &JoinerKey{Cert: cert, Pin: id.Fingerprint}, nil
}

// Joiner is a client of f's join listener presenting key (a new one when
// nil), trusting f's CA.
func (f *Founder) Joiner(t testing.TB, key *JoinerKey) *Client {
	t.Helper()
	if key == nil {
		key = NewJoinerKey(t)
	}
	return f.presenting(t, key.Cert, f.Join)
}

// Node is a client of f's admin API presenting a node's transport leaf
// (the pair of its delivery's nodeCert and nodeKey), as its agent does.
func (f *Founder) Node(t testing.TB, leaf tls.Certificate) *Client {
	t.Helper()
	return f.presenting(t, leaf, f.API)
}

// presenting is a client of hostPort trusting f's CA and presenting cert.
func (f *Founder) presenting(t testing.TB, cert tls.Certificate, hostPort string) *Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.Pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &Client{HTTP: &http.Client{Timeout: time.Minute, Transport: tr}, Base: "https://" + hostPort}
}

// Register posts req as the joiner c and wants status (201 for a new
// registration, 200 for the open one of the same key); it returns the
// joiner's view.
func (c *Client) Register(t testing.TB, req wire.RegisterRequest, status int) wire.JoinerView {
	t.Helper()
	var v wire.JoinerView
	c.Must(t, "POST", "/v1/join/registrations", req, status, &v)
	return v
}

// Approve approves joinID with the assignment a as the operator c.
func (c *Client) Approve(t testing.TB, joinID string, a wire.Assignment) wire.OperatorView {
	t.Helper()
	var v wire.OperatorView
	c.Must(t, "POST", "/v1/admin/join/registrations/"+url.PathEscape(joinID)+"/approve", a, http.StatusOK, &v)
	return v
}

// Agent is a `stratum agent` child process, killed when the test ends.
type Agent struct {
	cmd    *exec.Cmd
	out    syncbuf.Buffer
	exited chan struct{}
}

// StartAgent runs `stratum agent --api api --root root` with args (e.g.
// --listen, --interval).
func StartAgent(t testing.TB, api, root string, args ...string) *Agent {
	t.Helper()
	a, err := SpawnAgent(nil, api, root, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Kill)
	return a
}

// SpawnAgent starts `stratum agent --api api --root root` with args under
// the command prefix wrap (see FounderOptions.Wrap; none when empty), for
// code without a *testing.T (an agent started when its host's join ends,
// on a host of a lab's network namespace). It dies with the test
// process; the caller kills it.
func SpawnAgent(wrap []string, api, root string, args ...string) (*Agent, error) {
	bin, err := build()
	if err != nil {
		return nil, err
	}
	a := &Agent{exited: make(chan struct{})}
	a.cmd = wrapped(wrap, bin, append([]string{"agent", "--api", api, "--root", root}, args...)...)
	a.cmd.Env = Env()
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	a.cmd.Stdout, a.cmd.Stderr = &a.out, &a.out
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	return a, nil
}

// Output is what the agent has written so far.
func (a *Agent) Output() string { return a.out.String() }

// Exited is closed when the agent has exited.
func (a *Agent) Exited() <-chan struct{} { return a.exited }

// Kill kills the agent and waits for it to exit.
func (a *Agent) Kill() {
	_ = a.cmd.Process.Kill()
	<-a.exited
}

// NodeID is the node id a joined node's root names in its
// etc/stratum/node.yaml.
func NodeID(t testing.TB, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "etc/stratum/node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	id := NodeIDOf(string(b))
	if id == "" {
		t.Fatalf("no nodeId in node.yaml:\n%s", b)
	}
	return id
}

// NodeIDOf is the nodeId of a node.yaml ("" when it names none).
func NodeIDOf(nodeYAML string) string {
	for line := range strings.SplitSeq(nodeYAML, "\n") {
		if v, ok := strings.CutPrefix(line, "nodeId:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// wrapped is the command bin args under the prefix wrap (none when empty).
func wrapped(wrap []string, bin string, args ...string) *exec.Cmd {
	if len(wrap) == 0 {
		return exec.Command(bin, args...)
	}
	return exec.Command(wrap[0], append(append(append([]string{}, wrap[1:]...), bin), args...)...)
}
