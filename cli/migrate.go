package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"stratum/founder"
)

func init() { Register(newMigrateCmd) }

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate --data DIR --to DSN",
		Short: "copy a stopped bbolt founder into an empty PostgreSQL database",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data", "data directory of the stopped founder")
	to := fs.String("to", "", "postgres://USER:PASSWORD@HOST:PORT/DB, an empty database. It holds the password, which ps shows: set STRATUM_TO instead")
	keys := addKeyFlags(fs, "TPM holding the founder's sealed data key (when it is sealed)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ks, err := keys.source()
		if err != nil {
			return err
		}
		res, err := founder.Migrate(founder.DataDir(*data), ks, *to)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "copied %d keys in %d buckets into %s; counts match, audit chain intact (%d events)\n", res.Counts.Total(), len(res.Counts), res.Target, res.AuditEvents)
		fmt.Fprintf(out, "next: `stratum serve --data %s` with STRATUM_STORE set to the DSN (not --store on the command line: it holds the password; each further replica: a copy of data.key, see docs/HA.md)\n", *data)
		return nil
	}
	return cmd
}
