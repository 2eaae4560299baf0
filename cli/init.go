package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"stratum/buildinfo"
	"stratum/cluster"
	"stratum/founder"
)

func init() {
	Register(Command{Name: "init", Summary: "create a cluster in a data directory", Run: runInit})
	Register(Command{Name: "version", Summary: "print the build version and commit", Run: func(context.Context, []string) error {
		b := buildinfo.Current()
		fmt.Printf("stratum %s (commit %s)\n", b.Version, b.Commit)
		return nil
	}})
}

func runInit(_ context.Context, args []string) error {
	fs := newFlagSet("init")
	data := fs.String("data", "./data", "data directory")
	config := fs.String("config", "", "cluster file (YAML)")
	domain := fs.String("parent-domain", "", "override parentDomain")
	region := fs.String("region", "", "override region")
	release := fs.String("cluster-release", "", "override clusterRelease")
	email := fs.String("admin-email", "", "override adminEmail")
	keys := addKeyFlags(fs, "seal the data key to this TPM (/dev/tpmrm0 or a swtpm socket) instead of writing data.key")
	dsn := storeFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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
		return errors.New("give --config cluster.yaml (or at least --parent-domain and --region)")
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
		return describe(err)
	}
	fmt.Printf("cluster %s created in %s\n  CA pin: %s\n  admin credentials: %s\n", res.Identity.ClusterID, *data, res.CAPin, res.CredentialsPath)
	founder.PrintRecoveryKey(os.Stdout, res.RecoveryKey)
	return nil
}
