package unit

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite dist/stratum-agent.service")

// TestDistFile: dist/stratum-agent.service is the unit the binary prints
// (for a binary installed at /usr/bin/stratum).
func TestDistFile(t *testing.T) {
	path := "../../dist/" + Name
	if *update {
		if err := os.WriteFile(path, []byte(Render("")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != Render("") {
		t.Fatalf("dist/%s differs from `stratum agent --print-systemd-unit`: go test ./agent/unit -update", Name)
	}
}

// TestHardened: the unit keeps its hardening and restarts for ever.
func TestHardened(t *testing.T) {
	u := Render("/opt/x/stratum")
	for _, want := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "Restart=always", "ReadWritePaths=/etc/stratum ", "ExecStart=/opt/x/stratum agent\n", "EnvironmentFile=-" + EnvFile} {
		if !strings.Contains(u, want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
}
