package crash

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestReleaseSetConcurrentRecords: concurrent records of one node commit
// one after the other, and the last committed is the node's release. The
// release set is answered from a cache (releaseset.Service.records) that
// each record updates in an OnCommit hook, after its transaction and
// outside any lock, so two hooks can run in the other order than their
// commits and leave the cache on the record the store replaced. Each
// record here carries its own runningRelease, so each commit appends a
// release.recorded audit event in commit order: the release set must show
// the last one.
func TestReleaseSetConcurrentRecords(t *testing.T) {
	t.Parallel()
	h := newHarness(t, uint64(time.Now().UnixNano()))
	h.work = writableTempDir(t)
	h.dir = filepath.Join(h.work, "data")
	r := stratum(t, "init", "--data", h.dir, "--config", writeConfig(t, h.work))
	if r.code != 0 {
		t.Fatalf("init: %s %s", r.stdout, r.stderr)
	}
	h.pickAddrs()
	h.restart()
	t.Cleanup(func() {
		if h.f.Alive() {
			h.f.Kill()
		}
	})
	h.login()
	var set releaseSetView
	h.mustAdmin("GET", "/v1/admin/upgrades/release", nil, 200, &set)
	node := set.Node

	bursts, width := envInt("CRASH_RECORD_BURSTS", 10), 8
	seq, stale := 0, 0
	var after uint64
	for b := 1; b <= bursts; b++ {
		var wg sync.WaitGroup
		for i := 0; i < width; i++ {
			seq++
			body := map[string]any{"runningRelease": fmt.Sprintf("1.%d.%d", b, seq), "release": map[string]any{"imageMode": false,
				"os": map[string]any{"prettyName": "Crash Linux", "id": "crash", "versionId": "1", "buildId": fmt.Sprintf("crash-%d", seq), "kernel": "6.1.0"}}}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				api, _ := h.addrs()
				if st, raw, _, err := call(ctx, h.admin, "PUT", "https://"+api+"/v1/cluster/nodes/"+node+"/release", h.session, body, nil); err != nil || st != 204 {
					t.Errorf("record: %d %s %v", st, raw, err)
				}
			}()
		}
		wg.Wait()
		// The commit order, from the audit chain.
		last := ""
		for {
			var page struct {
				Events []struct {
					Seq     uint64            `json:"seq"`
					Kind    string            `json:"kind"`
					Subject string            `json:"subject"`
					Data    map[string]string `json:"data"`
				} `json:"events"`
			}
			h.mustAdmin("GET", fmt.Sprintf("/v1/admin/audit?after=%d&limit=1000", after), nil, 200, &page)
			for _, ev := range page.Events {
				after = ev.Seq
				if ev.Kind == "release.recorded" && ev.Subject == node {
					last = ev.Data["runningRelease"]
				}
			}
			if len(page.Events) < 1000 {
				break
			}
		}
		var now struct {
			Nodes []struct {
				NodeID         string `json:"nodeId"`
				RunningRelease string `json:"runningRelease"`
			} `json:"nodes"`
		}
		h.mustAdmin("GET", "/v1/admin/upgrades/release", nil, 200, &now)
		for _, n := range now.Nodes {
			if n.NodeID == node && n.RunningRelease != last {
				stale++
				t.Errorf("burst %d: the release set shows node %s on %s, but the last committed record (the audit chain's last release.recorded) is %s", b, node, n.RunningRelease, last)
			}
		}
	}
	t.Logf("%d bursts of %d concurrent records, %d answered a record the store had replaced", bursts, width, stale)
}
