package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"stratum/internal/stratumtest"
)

// TestReleaseSetWhoIsBehind (SPEC 17): the answer carries
// admissionRelease and, per node, behind; `stratum release-set` starts
// with a line naming who is behind. The founder runs what it admits
// joiners on: once the operator raises the admission release, its record
// follows at once, so a founder alone is never shown behind the release
// just set (TestReleaseSetMixedIsNotConsistent has nodes behind).
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
	r = run("release-set")
	first, _, _ := strings.Cut(r.stdout, "\n")
	if r.code != 0 || !strings.HasPrefix(first, "1 node; admission 0.2.0; behind: none; ") || !strings.Contains(r.stdout, "running release 0.2.0") {
		t.Fatalf("release-set after cluster release set 0.2.0: exit %d, %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = run("release-set", "-o", "json")
	var v struct {
		AdmissionRelease string
		RunningRelease   string
		Nodes            []struct {
			RunningRelease string
			Behind         bool
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.AdmissionRelease != "0.2.0" || v.RunningRelease != "0.2.0" || len(v.Nodes) != 1 || v.Nodes[0].Behind || v.Nodes[0].RunningRelease != "0.2.0" {
		t.Fatalf("release-set -o json: exit %d %s", r.code, r.stdout)
	}
}
