package crash

import (
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestStartupCost: a restart after a crash, and every command an operator
// runs then (`audit verify`, `backup`), pays the process's package
// initialization. No package may do expensive work at init: the one found
// here was an argon2id hash (64 MiB, seconds on a loaded host) computed
// for a dummy password in iam's package variables, before main runs.
func TestStartupCost(t *testing.T) {
	cmd := exec.Command(bin(), "version")
	cmd.Env = append(cleanEnv(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stratum version: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`(?m)^init (stratum\S*) @\S+ ms, (\S+) ms clock, (\d+) bytes, \d+ allocs$`)
	found := 0
	for _, m := range line.FindAllStringSubmatch(string(out), -1) {
		found++
		bytes, _ := strconv.Atoi(m[3])
		if bytes > 4<<20 {
			t.Errorf("package %s allocates %d bytes (%s ms) while initializing, in every stratum process; compute it on first use instead", m[1], bytes, m[2])
		}
	}
	if found == 0 {
		t.Fatalf("no inittrace lines for stratum packages:\n%s", out)
	}
}
