package wire_test

import (
	"os/exec"
	"strings"
	"testing"
)

// goListDeps is `go list -deps` of pkgs, one import path a line.
func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH; cannot list dependencies")
	}
	out, err := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", pkgs, err)
	}
	return strings.Fields(string(out))
}

// The node side (joiner, agent) links no founder storage: SPEC 20.
func TestNodeSideLinksNoDatabase(t *testing.T) {
	for _, dep := range goListDeps(t, "stratum/joiner", "stratum/agent") {
		switch {
		case dep == "stratum/store" || strings.HasPrefix(dep, "stratum/store/"),
			strings.HasPrefix(dep, "go.etcd.io/bbolt"),
			strings.HasPrefix(dep, "github.com/jackc/pgx"),
			dep == "stratum/cluster", dep == "stratum/releaseset", dep == "stratum/join", dep == "stratum/founder":
			t.Errorf("the joiner or the agent links %s", dep)
		}
	}
}

// The wire package imports only the standard library, so any program can
// link it without pulling founder code.
func TestWireImportsOnlyTheStandardLibrary(t *testing.T) {
	for _, dep := range goListDeps(t, "stratum/wire") {
		first, _, _ := strings.Cut(dep, "/")
		if dep != "stratum/wire" && (strings.Contains(first, ".") || first == "stratum") {
			t.Errorf("package wire links %s", dep)
		}
	}
}
