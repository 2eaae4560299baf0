package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"stratum/joiner"
	"stratum/tpm"
)

func init() { Register(newJoinCmd) }

func newJoinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "join --founder HOST:PORT --token T --ca-pin sha256:HEX [flags]",
		Short: "join this machine to a cluster: register, wait for approval, self-upgrade, install the delivery",
		Long: `Join this machine to a cluster: register, wait for approval, self-upgrade,
install the delivery.

exit codes: 0 joined, 1 error (fix it and run again: it resumes),
            2 usage, 3 the token was refused (used up, expired, revoked,
            mistyped: ask for a new one) or an operator rejected the join,
            4 join failed or the founder is not trusted`,
		Args: cobra.NoArgs,
	}
	var cfg joiner.Config
	fs := cmd.Flags()
	fs.StringVar(&cfg.Founder, "founder", "", "the founder's join listener, HOST:PORT; several HA replicas as a,b (tried in turn)")
	fs.StringVar(&cfg.Token, "token", "", "join token (sjt1...), as printed by stratum token create")
	tokenFile := fs.String("token-file", "", "file holding the join token (its first line): keeps it off the command line")
	cmd.MarkFlagsMutuallyExclusive("token", "token-file")
	fs.StringVar(&cfg.CAPin, "ca-pin", "", "cluster CA pin, sha256:<hex>: the only CA the joiner trusts")
	fs.StringVar(&cfg.Release, "release", "", "the release this machine runs (default: the one a previous run recorded in STATE-DIR/release, else ROOT/usr/lib/stratum/release, else IMAGE_VERSION in ROOT/etc/os-release)")
	fs.BoolVar(&cfg.SelfUpgrade, "self-upgrade", false, "upgrade this machine to the cluster's release when it runs an older one")
	fs.StringVar(&cfg.UpgradeHook, "upgrade-hook", "", "executable run as HOOK <verified-tree-dir> <new-release> to switch the OS (exit 0 = upgraded)")
	fs.StringVar(&cfg.ReleaseKeys, "release-keys", joiner.DefaultReleaseKeys, "directory of trusted release public keys (*.pub)")
	fs.StringVar(&cfg.StateDir, "state-dir", joiner.DefaultStateDir, "identity key, registration state and downloads")
	fs.StringVar(&cfg.Root, "root", joiner.DefaultRoot, "root of the node's file system: the delivery goes to ROOT/etc/stratum")
	fs.StringVar(&cfg.TPMPath, "tpm", tpm.DefaultPath, "TPM character device or swtpm unix socket: it proves this machine to the founder (TPM attestation) and the unseal key is sealed to it")
	pcrFlag := fs.String("pcrs", "7", "comma-separated SHA-256 PCRs the unseal key is bound to")
	fs.BoolVar(&cfg.InsecureStoreUnsealKey, "insecure-store-unseal-key", false, "without a TPM, store the OpenBao unseal key in plaintext (mode 0600) instead of failing")
	fs.BoolVar(&cfg.InstallAgent, "install-agent", false, "install and enable the node agent's systemd unit under --root once joined (stratum agent)")
	fs.StringVar(&cfg.AgentAPI, "agent-api", "", "the founder's admin API for the agent (default https://<founder host>:8443)")
	fs.StringVar(&cfg.Hostname, "hostname", "", "host name to register (default: this machine's)")
	fs.StringVar(&cfg.MgmtIP, "mgmt-ip", "", "management IP to register (default: the local address of the route to the founder)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *tokenFile != "" {
			b, err := os.ReadFile(*tokenFile)
			if err != nil {
				return fmt.Errorf("read the join token: %w", err)
			}
			line, _, _ := strings.Cut(string(b), "\n")
			cfg.Token = strings.TrimSpace(line)
		}
		if cfg.Founder == "" || cfg.Token == "" || cfg.CAPin == "" {
			return usagef("--founder, --token (or --token-file) and --ca-pin are required")
		}
		pcrs, err := tpm.ParsePCRs(*pcrFlag)
		if err != nil {
			return usagef("--pcrs: %w", err)
		}
		cfg.PCRs = pcrs
		cfg.Out = cmd.OutOrStdout()
		if err := joiner.Run(cmd.Context(), cfg); err != nil {
			// The joiner's own exit codes (its help lists them), as
			// before the move to cobra.
			return &ExitError{Code: joiner.ExitCode(err), Err: err}
		}
		return nil
	}
	return cmd
}
