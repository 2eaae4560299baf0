package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// TestReleaseSetMixedIsNotConsistent (issue: a mixed cluster read as
// consistent): the founder and two joined workers record one release
// record, the workers with their own leaves, all on 0.1.0: consistent.
// The operator sets the admission release to 0.2.0: the founder, which
// runs what it admits joiners on, records 0.2.0 at once, so the nodes
// run 0.2.0, 0.1.0 and 0.1.0. Different running releases are skew and
// nodes behind the admission release make the set not consistent; who is
// behind is counted over every node, also when no node is shown
// (--nodes 0); the answer's runningRelease is the oldest its nodes show,
// in every view and in /version; nodes show their hostnames. Once every
// node runs 0.2.0 the set is consistent again.
func TestReleaseSetMixedIsNotConsistent(t *testing.T) {
	dir := t.TempDir()
	f := stratumtest.ServeDev(t, dir)
	env := cliEnv(t, f)
	cliLogin(t, f, env)
	run := func(args ...string) result { t.Helper(); return stratumEnv(t, env, args...) }
	email, password := credentials(t, dir)
	admin := f.Login(t, email, password).Token
	l := &lab{f: f, admin: admin}
	l.join(t, "worker", "192.0.2.31")
	l.join(t, "worker", "192.0.2.32")
	w1, w2 := l.members[0], l.members[1]

	// One release record for every node (the founder's own, without the
	// host binaries a test build cannot name: no drift), so that only
	// the running release tells them apart.
	var set setJSON
	deadline := time.Now().Add(20 * time.Second)
	for set = releaseSetJSON(t, run); len(set.Nodes) != 3 || !set.Nodes[0].Recorded; set = releaseSetJSON(t, run) {
		if time.Now().After(deadline) {
			t.Fatalf("the founder did not record its own release: %+v", set.Nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
	founder := set.Nodes[0].NodeID
	var rec map[string]any
	if err := json.Unmarshal(set.Nodes[0].Release, &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec, "hostBinaries")
	delete(rec, "recordedAt")
	record := func(node string, c *http.Client, rel string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"runningRelease": rel, "release": rec})
		req, _ := http.NewRequest("PUT", "https://"+f.API+"/v1/cluster/nodes/"+node+"/release", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if c == nil {
			c = f.Client
			req.Header.Set("Authorization", "Bearer "+admin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("recording %s: %v", node, err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("recording %s: %d", node, resp.StatusCode)
		}
	}
	record(founder, nil, "0.1.0")
	record(w1.nodeID, w1.client, "0.1.0")
	record(w2.nodeID, w2.client, "0.1.0")
	if r := run("release-set", "--check"); r.code != 0 || !strings.Contains(r.stdout, "running release 0.1.0: consistent") {
		t.Fatalf("release-set --check of three nodes on 0.1.0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	if r := run("cluster", "release", "set", "0.2.0"); r.code != 0 {
		t.Fatalf("cluster release set: exit %d %s", r.code, r.stderr)
	}
	set = releaseSetJSON(t, run)
	if n := set.Nodes[0]; n.NodeID != founder || n.RunningRelease != "0.2.0" {
		t.Errorf("the founder after cluster release set 0.2.0: %s runs %s", n.NodeID, n.RunningRelease)
	}
	behind := w1.nodeID + " (0.1.0), " + w2.nodeID + " (0.1.0)"

	r := run("release-set")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || !strings.Contains(lines[len(lines)-1], "running release 0.1.0: not consistent") {
		t.Errorf("release-set of a mixed cluster: exit %d, last line %q", r.code, lines[len(lines)-1])
	}
	if !strings.HasPrefix(lines[0], "3 nodes; admission 0.2.0; behind: "+behind+"; skew: runningRelease") {
		t.Errorf("release-set's first line %q", lines[0])
	}
	// Each node's column is headed by its hostname too.
	if !strings.Contains(r.stdout, "lab-192-0-2-31") || !strings.Contains(r.stdout, "lab-192-0-2-32") {
		t.Errorf("release-set names no hostnames:\n%s", r.stdout)
	}
	if r := run("release-set", "--nodes", "0"); r.code != 0 || !strings.HasPrefix(r.stdout, "3 nodes; admission 0.2.0; behind: "+behind+";") {
		t.Errorf("release-set --nodes 0: exit %d, %q", r.code, r.stdout)
	}
	if r := run("release-set", "--check"); r.code != 1 {
		t.Errorf("release-set --check of a mixed cluster: exit %d", r.code)
	}

	set = releaseSetJSON(t, run)
	if set.Summary.Consistent || len(set.Summary.Skew) == 0 || set.Summary.Skew[0].Field != "runningRelease" {
		t.Errorf("release-set -o json of a mixed cluster: consistent %v, skew %+v", set.Summary.Consistent, set.Summary.Skew)
	}
	var names []string
	for _, b := range set.Summary.Behind {
		names = append(names, b.NodeID+" ("+b.RunningRelease+")")
	}
	if strings.Join(names, ", ") != behind || set.Summary.BehindCount != 2 {
		t.Errorf("summary.behind %+v (%d), want %s", set.Summary.Behind, set.Summary.BehindCount, behind)
	}
	for _, n := range set.Nodes {
		if n.Hostname == "" {
			t.Errorf("node %s has no hostname in the release set", n.NodeID)
		}
	}
	// The answer's runningRelease is what its nodes show, in the whole
	// answer, the summary, a page and /version.
	oldest := func(nodes []nodeJSON) string {
		o := ""
		for _, n := range nodes {
			if o == "" || n.RunningRelease < o {
				o = n.RunningRelease
			}
		}
		return o
	}
	var whole, summary, page setJSON
	f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release", nil, 200, &whole)
	f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release?view=summary", nil, 200, &summary)
	f.Operator(t).Must(t, "GET", "/v1/admin/upgrades/release?limit=1&after="+founder, nil, 200, &page)
	var version struct{ RunningRelease string }
	f.Operator(t).Must(t, "GET", "/version", nil, 200, &version)
	if o := oldest(whole.Nodes); o != "0.1.0" || whole.RunningRelease != o || summary.RunningRelease != o || page.RunningRelease != o || version.RunningRelease != o {
		t.Errorf("runningRelease: nodes' oldest %q, whole %q, summary %q, page %q, /version %q", o, whole.RunningRelease, summary.RunningRelease, page.RunningRelease, version.RunningRelease)
	}

	if r := run("members"); r.code != 0 || !strings.Contains(r.stdout, "HOSTNAME") || !strings.Contains(r.stdout, "lab-192-0-2-31") {
		t.Errorf("members names no hostnames: exit %d\n%s", r.code, r.stdout)
	}

	// Every node on the admission release: consistent, nobody behind.
	record(w1.nodeID, w1.client, "0.2.0")
	record(w2.nodeID, w2.client, "0.2.0")
	r = run("release-set", "--check")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "3 nodes; admission 0.2.0; behind: none; skew: none") || !strings.Contains(r.stdout, "running release 0.2.0: consistent") {
		t.Errorf("release-set --check once every node runs 0.2.0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

type nodeJSON struct {
	NodeID         string
	Hostname       string
	Recorded       bool
	RunningRelease string
	Release        json.RawMessage
}

type setJSON struct {
	RunningRelease string
	Summary        struct {
		Consistent bool
		Skew       []struct{ Field string }
		Behind     []struct {
			NodeID         string
			RunningRelease string
		}
		BehindCount int
	}
	Nodes []nodeJSON
}

func releaseSetJSON(t *testing.T, run func(args ...string) result) setJSON {
	t.Helper()
	r := run("release-set", "-o", "json")
	var set setJSON
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &set) != nil {
		t.Fatalf("release-set -o json: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	return set
}
