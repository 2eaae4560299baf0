package joinflow

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"stratum/internal/freeport"
	"stratum/internal/syncbuf"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"stratum/internal/stratumtest"
	"stratum/wire"
)

// drillJoiner is a `stratum join` child process that knows both founders.
type drillJoiner struct {
	name string
	root string
	out  *syncbuf.Buffer
	done chan error
}

func startDrillJoiner(t *testing.T, work, name, founders, token, pin, mgmtIP string, extra ...string) *drillJoiner {
	t.Helper()
	j := &drillJoiner{name: name, root: filepath.Join(work, name), out: &syncbuf.Buffer{}, done: make(chan error, 1)}
	args := append([]string{"join", "--founder", founders, "--token", token, "--ca-pin", pin,
		"--state-dir", filepath.Join(work, name+"-state"), "--root", j.root, "--hostname", name, "--mgmt-ip", mgmtIP,
		"--tpm", filepath.Join(work, "no-tpm"), "--insecure-store-unseal-key"}, extra...)
	cmd := exec.Command(stratumtest.Binary(t), args...)
	cmd.Env = stratumtest.Env()
	cmd.Stdout, cmd.Stderr = j.out, j.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { j.done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	return j
}

func (j *drillJoiner) wait(t *testing.T, limit time.Duration, founderLog func() string) {
	t.Helper()
	select {
	case err := <-j.done:
		if err != nil {
			t.Fatalf("join %s: %v\n%s\nfounder:\n%s", j.name, err, j.out.String(), founderLog())
		}
	case <-time.After(limit):
		t.Fatalf("join %s did not finish:\n%s\nfounder:\n%s", j.name, j.out.String(), founderLog())
	}
}

// pending returns the join id of name's pending registration on release
// rel, or "".
func pending(t *testing.T, f *stratumtest.Founder, name, rel string) string {
	var list struct {
		Registrations []struct{ JoinID, Hostname, Release string }
	}
	f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations?state=pending", nil, 200, &list)
	for _, r := range list.Registrations {
		if r.Hostname == name && r.Release == rel {
			return r.JoinID
		}
	}
	return ""
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDisasterRecoveryDrill is SPEC 18's drill: founder A with an
// imported release, a member running an agent, tokens and a waiting
// joiner is backed up (age, data key inside) while it serves, then
// destroyed; the backup is restored into a fresh directory and served on
// other ports as B. B starts isolated (issue 34): every acknowledged
// write can be inspected, but B probes no agent, sends nothing to OpenBao
// and refuses the agent and the joiner, until `stratum takeover`; then
// the agent and the joiner (whose --api/--founder lists name B too) carry
// on against B, a self-upgrade downloads from B, and audit verify passes.
func TestDisasterRecoveryDrill(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	dirA, dirB := filepath.Join(work, "a"), filepath.Join(work, "b")
	apiB, joinB := freeAddr(t), freeAddr(t)
	agentPort := freeport.Must(t, "127.0.0.2")

	cfg := filepath.Join(work, "cluster.yaml")
	os.WriteFile(cfg, []byte("parentDomain: stratum.example.com\nregion: lab-1\nclusterRelease: 0.2.0\ndnsUpstreamServers: []\n"), 0o600)
	tree := stratumtest.SignedReleaseTree(t, "0.2.0", []string{"0.1.0"}, 3<<20+77)
	pubDir := filepath.Join(work, "pub")
	os.MkdirAll(pubDir, 0o755)
	copyFile(t, tree.PubFile, filepath.Join(pubDir, "release.pub"))
	os.MkdirAll(filepath.Join(dirA, "release-keys"), 0o755)
	tree.Trust(t, dirA)
	a := stratumtest.Serve(t, dirA, "--dev", "--config", cfg, "--agent-port", strconv.Itoa(agentPort), "--probe-interval", "500ms")
	email, password := a.Credentials(t)
	a.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]string{"path": tree.Dir}, 201, nil)

	founders := a.Join + "," + joinB
	apis := "https://" + a.API + ",https://" + apiB
	joinToken := func(f *stratumtest.Founder, role string, uses int) string {
		var tok struct{ Token, TokenID string }
		f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": role, "uses": uses}, 201, &tok)
		return tok.Token
	}

	// A member with its agent.
	m1 := startDrillJoiner(t, work, "m1", founders, joinToken(a, "worker", 1), a.Pin, "127.0.0.2", "--release", "0.2.0")
	waitFor(t, 30*time.Second, "m1 pending\n"+m1.out.String(), func() bool { return pending(t, a, "m1", "0.2.0") != "" })
	a.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+pending(t, a, "m1", "0.2.0")+"/approve", map[string]any{}, 200, nil)
	m1.wait(t, 30*time.Second, a.Output)
	aout := startDrillAgent(t, m1.root, apis, "127.0.0.2", agentPort)

	// Acknowledged writes: API tokens, a join token kept for later, and a
	// joiner waiting for approval.
	var apiTokens []string
	for i := range 3 {
		var tok struct{ TokenID string }
		a.Operator(t).Must(t, "POST", "/v1/iam/tokens", map[string]any{"name": "drill-" + strconv.Itoa(i), "ttl": "1h",
			"policy": json.RawMessage(`{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:DescribeRelease"],"resource":["*"]}]}`)}, 201, &tok)
		apiTokens = append(apiTokens, tok.TokenID)
	}
	laterToken := joinToken(a, "worker", 1)
	j := startDrillJoiner(t, work, "waiting", founders, joinToken(a, "worker", 1), a.Pin, "127.0.0.3", "--release", "0.2.0")
	waitFor(t, 30*time.Second, "the waiting joiner pending\n"+j.out.String(), func() bool { return pending(t, a, "waiting", "0.2.0") != "" })
	var membersA struct{ Generation uint64 }
	a.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &membersA)

	// The backup, while A serves: age to the operator, data key inside.
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(work, "operator.key")
	os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600)
	bak := filepath.Join(work, "drill.age")
	mustRun(t, "backup", "--data", dirA, "--out", bak, "--recipient", id.Recipient().String(), "--include-data-key")

	// A is destroyed.
	pinA := a.Pin
	a.Kill()
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	destroyed := time.Now()

	// Restored into a fresh directory, checked against the pin the
	// operator wrote down, and served as B on other ports.
	out := mustRun(t, "restore", "--data", dirB, "--in", bak, "--identity", idFile, "--ca-pin", pinA)
	if !strings.Contains(out, pinA) || !strings.Contains(out, "of 1 release into") {
		t.Fatalf("restore said:\n%s", out)
	}
	if !strings.Contains(out, "stratum takeover --data "+dirB) {
		t.Fatalf("restore does not say its founder starts isolated:\n%s", out)
	}
	// B starts isolated: it must reach neither the nodes' agents nor
	// OpenBao. Its probes of the members' agents pass through a counting
	// relay (B's --agent-port), and its OpenBao is a listener that counts.
	relayPort, probes := agentRelay(t, agentPort, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	bao := &countingBao{}
	baoSrv := httptest.NewServer(bao)
	t.Cleanup(baoSrv.Close)
	baoToken := filepath.Join(work, "openbao.token")
	os.WriteFile(baoToken, []byte("s.drill-founder-token\n"), 0o600)
	sb := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dirB, Dev: true, APIAddr: apiB, JoinAddr: joinB,
		Args: []string{"--agent-port", strconv.Itoa(relayPort), "--probe-interval", "500ms", "--openbao-addr", baoSrv.URL, "--openbao-token-file", baoToken}})
	t.Cleanup(func() { sb.Stop(os.Interrupt, 20*time.Second) })
	if sb.Pin != pinA {
		t.Fatalf("B serves CA pin %s, A served %s", sb.Pin, pinA)
	}
	if strings.Contains(sb.Stdout(), "bootstrap-credentials.txt") {
		t.Errorf("B's banner names a credentials file that was not restored:\n%s", sb.Stdout())
	}
	if !strings.Contains(sb.Stdout(), "ISOLATED:") || !strings.Contains(sb.Stdout(), "stratum takeover --data "+dirB) {
		t.Fatalf("B's banner does not say it is isolated:\n%s", sb.Stdout())
	}
	admin := sb.AdminClient()
	admin.Token = admin.Login(t, email, password)
	b := sb
	b.SetOperator(admin)
	t.Logf("B serving %v after A was destroyed", time.Since(destroyed).Round(time.Millisecond))
	var version struct {
		Isolated *struct{ Backup, Message string }
	}
	b.Operator(t).Must(t, "GET", "/version", nil, 200, &version)
	if version.Isolated == nil || version.Isolated.Backup != filepath.Base(bak) {
		t.Fatalf("/version does not name B's isolation: %+v", version.Isolated)
	}
	b.Operator(t).Must(t, "GET", "/readyz", nil, 503, nil)

	// Every acknowledged write is there.
	var toks struct{ Tokens []struct{ TokenID string } }
	b.Operator(t).Must(t, "GET", "/v1/iam/tokens", nil, 200, &toks)
	have := map[string]bool{}
	for _, tk := range toks.Tokens {
		have[tk.TokenID] = true
	}
	for _, id := range apiTokens {
		if !have[id] {
			t.Errorf("API token %s acknowledged by A is missing on B", id)
		}
	}
	var rels struct {
		Releases []struct{ Release, Status string }
	}
	waitFor(t, 20*time.Second, "0.2.0 verified on B", func() bool {
		b.Operator(t).Must(t, "GET", "/v1/admin/releases", nil, 200, &rels)
		return len(rels.Releases) == 1 && rels.Releases[0].Status == "verified"
	})

	// While isolated, B refuses the nodes and joiners that try it (the
	// waiting joiner and m1's agent list it), and reaches neither the
	// agents nor OpenBao, over many probe intervals.
	waitOutput(t, 60*time.Second, "the waiting joiner refused by isolated B", j.out, "503 UNAVAILABLE")
	waitOutput(t, 60*time.Second, "m1's agent refused by isolated B", aout, "restored from a backup and is isolated")
	time.Sleep(3 * time.Second)
	if n := probes.Load(); n != 0 {
		t.Fatalf("isolated B opened %d connections to the members' agents", n)
	}
	if n := bao.requests.Load(); n != 0 {
		t.Fatalf("isolated B sent %d requests to OpenBao", n)
	}

	// The operator takes the cluster over with B: from now on it probes
	// the agents, asks OpenBao and answers the nodes.
	if out := mustRun(t, "takeover", "--data", dirB); !strings.Contains(out, "taken over") {
		t.Fatalf("takeover said:\n%s", out)
	}
	waitFor(t, 20*time.Second, "B probing the agents after the take-over", func() bool { return probes.Load() > 0 })
	waitFor(t, 20*time.Second, "B asking OpenBao after the take-over", func() bool { return bao.requests.Load() > 0 })
	b.Operator(t).Must(t, "GET", "/readyz", nil, 200, nil)
	version.Isolated = nil
	b.Operator(t).Must(t, "GET", "/version", nil, 200, &version)
	if version.Isolated != nil {
		t.Fatalf("/version still names an isolation after the take-over: %+v", version.Isolated)
	}
	var audit struct{ Events []wire.AuditEvent }
	b.Operator(t).Must(t, "GET", "/v1/admin/audit?limit=1000", nil, 200, &audit)
	kinds := map[string]string{}
	for _, e := range audit.Events {
		kinds[e.Kind] = e.Actor
	}
	if kinds["cluster.restored"] != "restore" || kinds["cluster.taken-over"] != "control-socket" {
		t.Fatalf("the restore and the take-over are not audited: %v", kinds)
	}

	// The waiting joiner carries on against B and joins; the generation it
	// raises is applied by m1's agent, which now reports to B.
	var waitingID string
	waitFor(t, 30*time.Second, "the waiting joiner pending on B", func() bool { waitingID = pending(t, b, "waiting", "0.2.0"); return waitingID != "" })
	b.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+waitingID+"/approve", map[string]any{}, 200, nil)
	j.wait(t, 60*time.Second, sb.Output)
	// Every member runs an agent: the next join waits for each to apply
	// its generation.
	startDrillAgent(t, j.root, apis, "127.0.0.3", agentPort)
	var members struct {
		Generation uint64
		Members    []struct {
			Hostname, State   string
			AppliedGeneration uint64
		}
	}
	b.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
	if members.Generation <= membersA.Generation {
		t.Fatalf("generation %d on B, %d on A", members.Generation, membersA.Generation)
	}
	for _, m := range members.Members {
		if m.Hostname == "m1" && m.AppliedGeneration != members.Generation {
			t.Errorf("m1's agent applied generation %d of %d on B\n%s", m.AppliedGeneration, members.Generation, aout.String())
		}
	}

	// A self-upgrading joiner, with a token A issued, downloads the
	// release from B.
	hook := filepath.Join(work, "hook.sh")
	os.WriteFile(hook, []byte("#!/bin/sh\necho \"$2\" > "+filepath.Join(work, "hook.out")+"\n"), 0o755)
	k := startDrillJoiner(t, work, "upgrader", founders, laterToken, pinA, "127.0.0.4",
		"--release", "0.1.0", "--self-upgrade", "--upgrade-hook", hook, "--release-keys", pubDir)
	var upgraderID string
	waitFor(t, 60*time.Second, "the upgraded joiner pending on B\n"+k.out.String(), func() bool {
		upgraderID = pending(t, b, "upgrader", "0.2.0")
		return upgraderID != ""
	})
	b.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+upgraderID+"/approve", map[string]any{}, 200, nil)
	k.wait(t, 60*time.Second, sb.Output)
	if sent := metric(t, b, "stratum_release_bytes_sent_total"); sent < 3<<20 {
		t.Fatalf("B sent %v release bytes, want the whole release", sent)
	}
	if hookSaw, _ := os.ReadFile(filepath.Join(work, "hook.out")); string(hookSaw) != "0.2.0\n" {
		t.Fatalf("the upgrade hook saw %q", hookSaw)
	}

	// The chain B inherited and extended verifies.
	if out := mustRun(t, "audit", "verify", "--data", dirB); !strings.Contains(out, "intact") {
		t.Fatalf("audit verify on B: %s", out)
	}
	t.Logf("drill done %v after A was destroyed", time.Since(destroyed).Round(time.Millisecond))
}

// startDrillAgent runs `stratum agent` for the node at root, reporting to
// every founder in apis; its output is returned.
func startDrillAgent(t *testing.T, root, apis, ip string, port int) *syncbuf.Buffer {
	t.Helper()
	copyFile(t, "/etc/os-release", filepath.Join(root, "etc/os-release"))
	agent := exec.Command(stratumtest.Binary(t), "agent", "--api", apis, "--root", root, "--listen", ip+":"+strconv.Itoa(port), "--interval", "1s")
	agent.Env = stratumtest.Env()
	out := &syncbuf.Buffer{}
	agent.Stdout, agent.Stderr = out, out
	agent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	return out
}

// agentRelay listens on one free port of every ip and relays each
// connection to the same ip's agentPort, counting them: the founder under
// test probes the agents through it (its --agent-port).
func agentRelay(t *testing.T, agentPort int, ips ...string) (int, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	for try := 0; ; try++ {
		port := freeport.Must(t, ips[0])
		var lns []net.Listener
		for _, ip := range ips {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) < len(ips) {
			for _, ln := range lns {
				ln.Close()
			}
			if try == 5 {
				t.Fatal("no port free on every relay address")
			}
			continue
		}
		for i, ln := range lns {
			t.Cleanup(func() { ln.Close() })
			target := net.JoinHostPort(ips[i], strconv.Itoa(agentPort))
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					n.Add(1)
					go relay(c, target)
				}
			}()
		}
		return port, &n
	}
}

func relay(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
}

// countingBao stands in for OpenBao: it counts requests and refuses them.
type countingBao struct{ requests atomic.Int64 }

func (b *countingBao) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.requests.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, `{"errors":["permission denied"]}`)
}

// waitOutput waits until out holds want, and shows out if it never does.
func waitOutput(t *testing.T, limit time.Duration, what string, out *syncbuf.Buffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(limit); !strings.Contains(out.String(), want); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s:\n%s", what, out.String())
		}
	}
}
