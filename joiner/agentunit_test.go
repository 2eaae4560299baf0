package joiner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stratum/agent/unit"
	"stratum/crypto"
	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
)

// TestInstallAgent: the joiner writes the release it joined on for the
// agent, and with --install-agent the unit, its flags and the enablement
// link under --root (systemd is not asked to start anything there).
func TestInstallAgent(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	delivery, _ := f.Delivery(t, "n-abc12def", "unseal-"+crypto.RandomHex(8))
	f.AcceptOn("registered", delivery)
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.InsecureStoreUnsealKey = true
	cfg.InstallAgent = true
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	if got := readFile(t, cfg.Root, "etc/stratum/release"); got != "0.6.0\n" {
		t.Errorf("etc/stratum/release = %q", got)
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if got := readFile(t, cfg.Root, "etc/systemd/system/"+unit.Name); got != unit.Render(exe) {
		t.Errorf("unit:\n%s", got)
	}
	host := strings.Split(cfg.Founder, ":")[0]
	if env := readFile(t, cfg.Root, "etc/stratum/agent.env"); !strings.Contains(env, "\nSTRATUM_API=https://"+host+":8443\n") {
		t.Errorf("agent.env:\n%s", env)
	}
	target, err := os.Readlink(filepath.Join(cfg.Root, "etc/systemd/system/multi-user.target.wants", unit.Name))
	if err != nil || target != "/etc/systemd/system/"+unit.Name {
		t.Errorf("enablement link: %q %v", target, err)
	}
	contains(t, out.String(), "agent unit installed")
}
