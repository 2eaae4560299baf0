package joinflow

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stratum/internal/freeport"
	"stratum/internal/stratumtest"
)

// TestAgent: a real founder, two real joins into temp roots, and
// `stratum agent` on the first: its release is recorded from the host,
// it applies the generation of the second join (which is joined only
// then), the prober sees it ready, and unreachable once it is killed.
func TestAgent(t *testing.T) {
	work := t.TempDir()
	agentPort := freeport.Must(t, "127.0.0.2")
	f := stratumtest.Serve(t, filepath.Join(work, "founder"), "--dev", "--agent-port", strconv.Itoa(agentPort), "--probe-interval", "300ms")

	rootA := joinNode(t, f, work, "node-a", "127.0.0.2")
	// The node's own file system: the agent reads ROOT/etc/os-release.
	copyFile(t, "/etc/os-release", filepath.Join(rootA, "etc/os-release"))
	if b, err := os.ReadFile(filepath.Join(rootA, "etc/stratum/release")); err != nil || string(b) != "0.1.0\n" {
		t.Fatalf("the joiner's etc/stratum/release: %q %v", b, err)
	}
	nodeA := stratumtest.NodeID(t, rootA)

	agent := stratumtest.StartAgent(t, "https://"+f.API, rootA, "--listen", "127.0.0.2:"+strconv.Itoa(agentPort), "--interval", "2s", "--packages", "base=base-files")
	started := time.Now()

	// The release set has the node's record from its host.
	kernel := strings.TrimSpace(mustOutput(t, "uname", "-r"))
	osID := osReleaseValue(t, "ID")
	var node struct {
		NodeID, RunningRelease string
		Recorded               bool
		Release                struct {
			OS       struct{ ID, Kernel string }
			Packages []struct{ Component, Name, Version string }
		}
	}
	waitFor(t, 20*time.Second, "node-a recorded in the release set\n"+agent.Output(), func() bool {
		var set struct{ Nodes []json.RawMessage }
		f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &set)
		for _, raw := range set.Nodes {
			json.Unmarshal(raw, &node)
			if node.NodeID == nodeA {
				return node.Recorded
			}
		}
		return false
	})
	if node.Release.OS.ID != osID || node.Release.OS.Kernel != kernel || node.RunningRelease != "0.1.0" {
		t.Fatalf("node-a's record: %+v (want os %s, kernel %s)", node, osID, kernel)
	}
	if len(node.Release.Packages) != 1 || node.Release.Packages[0].Name != "base-files" || node.Release.Packages[0].Version == "" {
		t.Fatalf("node-a's packages: %+v", node.Release.Packages)
	}
	t.Logf("%s recorded after %v: os %s, kernel %s, %+v", nodeA, time.Since(started).Round(time.Millisecond), node.Release.OS.ID, node.Release.OS.Kernel, node.Release.Packages)

	// A second join raises the generation: it is joined only once node-a's
	// agent has written members.json and reported the generation applied.
	rootB := joinNode(t, f, work, "node-b", "127.0.0.3")
	var members struct {
		Generation uint64
		Members    []struct {
			NodeID, State, BootState string
			AppliedGeneration        uint64
			LastBootMs               int64
		}
	}
	f.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
	if len(members.Members) != 3 || members.Members[2].State != "active" {
		t.Fatalf("members: %+v", members)
	}
	for _, m := range members.Members {
		if m.AppliedGeneration != members.Generation {
			t.Errorf("%s applied %d of %d", m.NodeID, m.AppliedGeneration, members.Generation)
		}
	}
	var onDisk struct{ Generation uint64 }
	raw, err := os.ReadFile(filepath.Join(rootA, "etc/stratum/members.json"))
	if err != nil || json.Unmarshal(raw, &onDisk) != nil || onDisk.Generation != members.Generation {
		t.Fatalf("node-a's members.json: %s %v", raw, err)
	}

	// Boot health: node-a ready (in the members list and in node-b's
	// bundle), node-b, without an agent, unreachable.
	bootOf := func(id string) (string, int64) {
		f.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
		for _, m := range members.Members {
			if m.NodeID == id {
				return m.BootState, m.LastBootMs
			}
		}
		return "", 0
	}
	waitFor(t, 10*time.Second, "node-a ready", func() bool { s, ms := bootOf(nodeA); return s == "ready" && ms > 0 })
	_, bootMs := bootOf(nodeA)
	t.Logf("%s ready after %v (lastBootMs %d); generation %d applied by every member", nodeA, time.Since(started).Round(time.Millisecond), bootMs, members.Generation)
	waitFor(t, 10*time.Second, "node-b unreachable", func() bool { s, _ := bootOf(stratumtest.NodeID(t, rootB)); return s == "unreachable" })
	bundle, _ := os.ReadFile(filepath.Join(rootB, "etc/stratum/bundle.json"))
	if !bytes.Contains(bundle, []byte(`"bootState": "ready"`)) {
		t.Errorf("node-b's bundle carries no ready peer:\n%s", bundle)
	}
	out := mustRun(t, "members", "--api", "https://"+f.API, "--ca-file", filepath.Join(f.Dir, "ca.pem"), "--token-file", tokenFile(t, f))
	if !strings.Contains(out, "ready") || !strings.Contains(out, "unreachable") {
		t.Errorf("stratum members:\n%s", out)
	}

	agent.Kill()
	killed := time.Now()
	waitFor(t, 10*time.Second, "node-a unreachable after its agent died", func() bool { s, _ := bootOf(nodeA); return s == "unreachable" })
	t.Logf("%s unreachable %v after its agent was killed (probe interval 300ms)", nodeA, time.Since(killed).Round(time.Millisecond))
}

// joinNode runs `stratum join` for a worker at mgmtIP, approves it, and
// returns its root once the joiner exits joined.
func joinNode(t *testing.T, f *stratumtest.Founder, work, name, mgmtIP string) string {
	t.Helper()
	j := startJoin(t, f, work, name, mgmtIP, "worker")
	f.Operator(t).Must(t, "POST", "/v1/admin/join/registrations/"+j.joinID+"/approve", map[string]any{}, 200, nil)
	return j.wait(t, f, 30*time.Second)
}

// runningJoin is a `stratum join` child process whose registration is pending.
type runningJoin struct {
	name, root, joinID string
	out                *bytes.Buffer
	done               chan error
	cmd                *exec.Cmd
}

// startJoin starts `stratum join` with a token of role and waits until
// its registration is pending.
func startJoin(t *testing.T, f *stratumtest.Founder, work, name, mgmtIP, role string) *runningJoin {
	t.Helper()
	var tok struct{ Token string }
	f.Operator(t).Must(t, "POST", "/v1/admin/join/tokens", map[string]any{"role": role}, 201, &tok)
	root := filepath.Join(work, name)
	cmd := exec.Command(stratumtest.Binary(t), "join", "--founder", f.Join, "--token", tok.Token, "--ca-pin", f.Pin, "--release", "0.1.0",
		"--state-dir", filepath.Join(work, name+"-state"), "--root", root, "--hostname", name, "--mgmt-ip", mgmtIP,
		"--tpm", filepath.Join(work, "no-tpm"), "--insecure-store-unseal-key")
	cmd.Env = stratumtest.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	var joinID string
	waitFor(t, 20*time.Second, name+" pending\n"+out.String(), func() bool {
		var list struct {
			Registrations []struct{ JoinID, Hostname string }
		}
		f.Operator(t).Must(t, "GET", "/v1/admin/join/registrations?state=pending", nil, 200, &list)
		for _, r := range list.Registrations {
			if r.Hostname == name {
				joinID = r.JoinID
			}
		}
		return joinID != ""
	})
	return &runningJoin{name: name, root: root, joinID: joinID, out: &out, done: done, cmd: cmd}
}

// wait returns the join's root once the joiner exits joined.
func (j *runningJoin) wait(t *testing.T, f *stratumtest.Founder, limit time.Duration) string {
	t.Helper()
	select {
	case err := <-j.done:
		if err != nil {
			t.Fatalf("join %s: %v\n%s\nfounder:\n%s", j.name, err, j.out.String(), f.Output())
		}
	case <-time.After(limit):
		j.cmd.Process.Kill()
		t.Fatalf("join %s did not finish:\n%s", j.name, j.out.String())
	}
	return j.root
}

func mustOutput(t *testing.T, name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func osReleaseValue(t *testing.T, key string) string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Skip("this host has no /etc/os-release")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func tokenFile(t *testing.T, f *stratumtest.Founder) string {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(f.Operator(t).Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
