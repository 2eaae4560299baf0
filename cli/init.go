package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"stratum/buildinfo"
	"stratum/cluster"
	"stratum/founder"
)

func init() {
	Register(newInitCmd)
	Register(newVersionCmd)
}

func newVersionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print the build version and commit (also stratum --version)",
		Args:  cobra.NoArgs,
	}
	o := addOutput(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		b := buildinfo.Current()
		raw, err := json.Marshal(map[string]string{"version": b.Version, "commit": b.Commit})
		if err != nil {
			return err
		}
		return o.render(cmd.OutOrStdout(), raw, nil, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "stratum %s (commit %s)\n", b.Version, b.Commit)
			return err
		})
	}
	return cmd
}

func newInitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init --config cluster.yaml",
		Short: "create a cluster in a data directory",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data", "data directory")
	config := fs.String("config", "", "cluster file (YAML)")
	domain := fs.String("parent-domain", "", "override parentDomain")
	region := fs.String("region", "", "override region")
	release := fs.String("cluster-release", "", "override clusterRelease")
	email := fs.String("admin-email", "", "override adminEmail")
	keys := addKeyFlags(fs, "seal the data key to this TPM (/dev/tpmrm0 or a swtpm socket) instead of writing data.key")
	dsn := storeFlag(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ks, err := keys.source()
		if err != nil {
			return err
		}
		var cfg cluster.Config
		if *config != "" {
			c, err := cluster.LoadConfig(*config)
			if err != nil {
				return err
			}
			cfg = c
		} else if *domain == "" || *region == "" {
			return usagef("give --config cluster.yaml (or at least --parent-domain and --region)")
		}
		for _, o := range []struct {
			dst *string
			v   string
		}{{&cfg.ParentDomain, *domain}, {&cfg.Region, *region}, {&cfg.ClusterRelease, *release}, {&cfg.AdminEmail, *email}} {
			if o.v != "" {
				*o.dst = o.v
			}
		}
		res, err := founder.InitWithKey(founder.DataDir(*data), cfg, false, ks, *dsn, time.Now())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "cluster %s created in %s\n  CA pin: %s\n  admin credentials: %s\n", res.Identity.ClusterID, *data, res.CAPin, res.CredentialsPath)
		founder.PrintRecoveryKey(out, res.RecoveryKey)
		return nil
	}
	return cmd
}
