package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"stratum/agent"
	"stratum/agent/unit"
	"stratum/buildinfo"
	"stratum/hostrecord"
)

func init() { Register(newAgentCmd) }

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent --api https://HOST:PORT [flags]",
		Short: "run the node agent: record this node's release, apply the membership, serve /startupz",
		Long: `Runs on a joined node with the transport leaf stratum join wrote under
ROOT/etc/stratum. Every flag has a STRATUM_* twin (the unit reads them
from /etc/stratum/agent.env). stratum agent --print-systemd-unit prints
its systemd unit.`,
		Args: cobra.NoArgs,
	}
	cfg := agent.Config{Build: buildinfo.Current()}
	fs := cmd.Flags()
	fs.StringVar(&cfg.API, "api", "", "the founder's admin API, https://HOST:PORT; an HA founder's replicas as https://a:8443,https://b:8443 (tried in turn)")
	fs.StringVar(&cfg.Root, "root", agent.DefaultRoot, "root of the node's file system (node.yaml, secrets, members.json under ROOT/etc/stratum)")
	fs.DurationVar(&cfg.Interval, "interval", agent.DefaultInterval, "how often the release is recorded when nothing changes (+-10% jitter)")
	fs.DurationVar(&cfg.LeafRenewBefore, "leaf-renew-before", agent.DefaultLeafRenewBefore, "renew the node's transport leaf (365 days) once less than this remains of it; larger than 8760h renews at every check (hourly, or each --interval when shorter)")
	fs.StringVar(&cfg.Listen, "listen", "", "address of the mTLS /startupz (default: the node's mgmtIp, port 9444)")
	packages := fs.String("packages", "", "host packages to report: component=name1|name2,... or bare names")
	fs.StringVar(&cfg.PinsFile, "pins-file", "", "the control plane's image pins (JSON), compared with the running containers")
	fs.StringVar(&cfg.PayloadDir, "payload-dir", "", "where release payloads are kept (e.g. /var/lib/stratum/upgrade); unset: stored is not read")
	printUnit := fs.Bool("print-systemd-unit", false, "print the agent's systemd unit and exit")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *printUnit {
			exe, err := os.Executable()
			if err != nil {
				exe = unit.DefaultExecutable
			}
			fmt.Fprint(cmd.OutOrStdout(), unit.Render(exe))
			return nil
		}
		if cfg.API == "" {
			return usagef("--api is required")
		}
		specs, err := hostrecord.ParsePackages(*packages)
		if err != nil {
			return err
		}
		cfg.Packages = specs
		cfg.Log = newLogger(*logLevel, *logFormat)
		return agent.Run(cmd.Context(), cfg)
	}
	return cmd
}
