package cli

import (
	"context"
	"fmt"

	"stratum/founder"
)

func init() {
	Register(Command{Name: "migrate", Summary: "copy a stopped bbolt founder into an empty PostgreSQL database (--data DIR --to DSN)", Run: runMigrate})
}

func runMigrate(_ context.Context, args []string) error {
	fs := newFlagSet("migrate")
	data := fs.String("data", "./data", "data directory of the stopped founder")
	to := fs.String("to", "", "postgres://USER:PASSWORD@HOST:PORT/DB, an empty database")
	keys := addKeyFlags(fs, "TPM holding the founder's sealed data key (when it is sealed)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ks, err := keys.source()
	if err != nil {
		return err
	}
	res, err := founder.Migrate(founder.DataDir(*data), ks, *to)
	if err != nil {
		return err
	}
	fmt.Printf("copied %d keys in %d buckets into %s; counts match, audit chain intact (%d events)\n", res.Counts.Total(), len(res.Counts), res.Target, res.AuditEvents)
	fmt.Printf("next: `stratum serve --data %s --store DSN` (each further replica: a copy of data.key, see docs/HA.md)\n", *data)
	return nil
}
