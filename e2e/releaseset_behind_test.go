package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"stratum/internal/stratumtest"
)

// TestReleaseSetWhoIsBehind (SPEC 17): once the operator raises the
// admission release, a node still on the old one is flagged behind: the
// answer carries admissionRelease and behind, `stratum release-set`
// starts with a line naming it, and --check exits 1.
func TestReleaseSetWhoIsBehind(t *testing.T) {
	dir := t.TempDir()
	f := stratumtest.ServeDev(t, dir)
	env := cliEnv(t, f)
	cliLogin(t, f, env)
	run := func(args ...string) result { t.Helper(); return stratumEnv(t, env, args...) }

	r := run("release-set")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "1 node; admission 0.1.0; behind: none; ") {
		t.Fatalf("release-set before: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := run("cluster", "release", "set", "0.2.0"); r.code != 0 {
		t.Fatalf("cluster release set: exit %d %s", r.code, r.stderr)
	}
	// The founder records what it runs every few minutes: until then it
	// still reports 0.1.0, behind the admission release.
	r = run("release-set", "--check")
	first, _, _ := strings.Cut(r.stdout, "\n")
	if r.code != 1 || !strings.HasPrefix(first, "1 node; admission 0.2.0; behind: n-") || !strings.Contains(first, " (0.1.0)") {
		t.Fatalf("release-set --check with a node behind: exit %d, first line %q, stderr %q", r.code, first, r.stderr)
	}
	r = run("release-set", "-o", "json")
	var v struct {
		AdmissionRelease string
		Nodes            []struct{ Behind bool }
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.AdmissionRelease != "0.2.0" || len(v.Nodes) != 1 || !v.Nodes[0].Behind {
		t.Fatalf("release-set -o json: exit %d %s", r.code, r.stdout)
	}
}
