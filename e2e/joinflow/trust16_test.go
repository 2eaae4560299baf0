package joinflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
)

// storeBackends runs a test on the bbolt file and on PostgreSQL.
var storeBackends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"bbolt", func(*testing.T) string { return "" }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// trustFounderOn is trustFounder with its state on dsn (the bbolt file
// when empty).
func trustFounderOn(t *testing.T, rel, dsn string) *founder {
	t.Helper()
	if dsn == "" {
		return trustFounder(t, rel)
	}
	work := t.TempDir()
	dir := filepath.Join(work, "founder")
	cfg := filepath.Join(work, "cluster.yaml")
	yaml := "parentDomain: stratum.example.com\nregion: lab-1\nclusterRelease: " + rel + "\ndnsUpstreamServers: []\nvips:\n  api: " + apiVIP + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "init", "--data", dir, "--config", cfg, "--store", dsn)
	return startFounder(t, dir, "--store", dsn)
}

func (f *founder) admission(t *testing.T) string {
	t.Helper()
	v, _ := f.versionView(t, f.admin.Token)["admissionRelease"].(string)
	return v
}

// TestTrust16_6_AdmissionRisesOnlyToAHeldRelease: a joined member's leaf
// records 99.0.0, and a token allowed only upgrade:RecordRelease records
// 99.0.0 for every joined node and the founder: the admission release
// does not move (second build: 99.0.0, and every joiner 409). It rises by
// itself only to a release imported on the founder that every joined
// member reports.
func TestTrust16_6_AdmissionRisesOnlyToAHeldRelease(t *testing.T) {
	for _, be := range storeBackends {
		t.Run(be.name, func(t *testing.T) {
			f := trustFounderOn(t, "0.2.0", be.dsn(t))
			a := f.joined(t, "0.2.0", "192.0.2.61")

			a.record(t, "99.0.0").want(t, 204, "")
			if got := f.admission(t); got != "0.2.0" {
				t.Fatalf("after a member's leaf recorded 99.0.0 the admission release is %s, want 0.2.0", got)
			}
			var tok struct{ Token string }
			f.do(t, "POST", "/v1/iam/tokens", map[string]any{"name": "recorder", "ttl": "1h", "policy": json.RawMessage(`{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:RecordRelease"],"resource":["*"]}]}`)}, 201, &tok)
			var members struct{ Members []struct{ NodeID string } }
			f.do(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
			for _, m := range members.Members {
				send(t, f.Client, "PUT", "https://"+f.API+"/v1/cluster/nodes/"+m.NodeID+"/release", tok.Token, releaseRecord("99.0.0")).want(t, 204, "")
			}
			if got := f.admission(t); got != "0.2.0" {
				t.Fatalf("after a recorder token recorded 99.0.0 for every node the admission release is %s, want 0.2.0", got)
			}
			_, reg := f.register(t, f.joinToken(t, 1), "0.2.0", "192.0.2.62")
			reg.want(t, 201, "")

			// Imported on the founder and reported by every joined member:
			// the admission release follows by itself, to that release.
			tree := stratumtest.SignedReleaseTree(t, "0.3.0", nil, 1024)
			tree.Trust(t, f.Dir)
			f.do(t, "POST", "/v1/admin/releases", map[string]any{"path": tree.Dir}, 201, nil)
			if got := f.admission(t); got != "0.2.0" {
				t.Fatalf("the import alone moved the admission release to %s", got)
			}
			a.record(t, "0.3.0").want(t, 204, "")
			if got := f.admission(t); got != "0.3.0" {
				t.Fatalf("every joined member reports the held 0.3.0: admission %s, want 0.3.0", got)
			}
		})
	}
}
