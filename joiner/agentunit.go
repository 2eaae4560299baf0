package joiner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"stratum/agent/unit"
	"stratum/crypto"
)

// The unit's place under --root, and its enablement link (what
// `systemctl enable` creates for WantedBy=multi-user.target).
const (
	unitDir   = "etc/systemd/system"
	wantsDir  = "etc/systemd/system/multi-user.target.wants"
	agentPort = "8443" // the admin API's default port
)

// agentAPI is --agent-api, else the admin API on the founder's host.
func (c *Config) agentAPI() string {
	if c.AgentAPI != "" {
		return c.AgentAPI
	}
	host, _, err := net.SplitHostPort(c.Founder)
	if err != nil {
		host = c.Founder
	}
	return "https://" + net.JoinHostPort(host, agentPort)
}

// installAgent writes the agent's unit and its environment file under
// --root and enables the unit. On the real root with systemd running it
// also starts it; under another root the node's next boot does.
func (j *joiner) installAgent(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	api := j.cfg.agentAPI()
	if strings.ContainsAny(api, "\n\"\\$`") {
		return fmt.Errorf("--agent-api %q cannot go into an environment file", api)
	}
	root := j.cfg.Root
	for _, d := range []string{unitDir, wantsDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return fmt.Errorf("install the agent: %w", err)
		}
	}
	unitPath := filepath.Join(root, unitDir, unit.Name)
	if err := crypto.WriteFileAtomic(unitPath, []byte(unit.Render(exe)), 0o644); err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	env := "# stratum agent flags (STRATUM_<FLAG>), written by stratum join --install-agent\nSTRATUM_API=" + api + "\n"
	if err := crypto.WriteFileAtomic(filepath.Join(root, strings.TrimPrefix(unit.EnvFile, "/")), []byte(env), 0o644); err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	link := filepath.Join(root, wantsDir, unit.Name)
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("install the agent: %w", err)
	}
	if err := os.Symlink("/"+unitDir+"/"+unit.Name, link); err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	j.log.printf("agent unit installed: %s (api %s)", unitPath, api)
	if !j.cfg.systemd.manages(root) {
		j.log.printf("  it starts at the node's next boot, or now with: systemctl daemon-reload && systemctl start %s", unit.Name)
		return nil
	}
	// The unit is installed and enabled; starting it is a courtesy.
	if j.systemctl(ctx, []string{"daemon-reload"}, []string{"start", "--no-block", unit.Name}) {
		j.log.printf("  started")
	}
	return nil
}

// systemd is how the joiner asks systemd to act on the agent's unit: it
// manages the unit only on the real root with systemd running (under
// another root, the node's next boot reads the files).
type systemd struct {
	manages func(root string) bool
	run     func(ctx context.Context, args ...string) ([]byte, error)
}

// hostSystemd is this host's: sd_booted(3) (systemd is PID 1) and
// systemctl.
var hostSystemd = &systemd{
	manages: func(root string) bool {
		_, err := os.Stat("/run/systemd/system")
		return filepath.Clean(root) == "/" && err == nil
	},
	run: func(ctx context.Context, args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
	},
}

// systemctl runs each step in turn, within 30 s, until one fails, which
// it warns of: what it asks is never what the join depends on.
func (j *joiner) systemctl(ctx context.Context, steps ...[]string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, args := range steps {
		if out, err := j.cfg.systemd.run(ctx, args...); err != nil {
			j.log.printf("warning: systemctl %s: %v %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			return false
		}
	}
	return true
}
