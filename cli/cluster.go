package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"stratum/releaseset"
)

func init() {
	Register(Command{Name: "cluster", Summary: "cluster settings: release set V [--allow-downgrade]", Run: runCluster})
}

// runCluster: `stratum cluster release set V [--allow-downgrade]` sets
// the admission release joiners are admitted on (SPEC 10.2).
func runCluster(ctx context.Context, args []string) error {
	const usage = "usage: stratum cluster release set VERSION [--allow-downgrade]"
	if len(args) < 2 || args[0] != "release" || args[1] != "set" {
		return errors.New(usage)
	}
	cmd := newAdminCommand("cluster release set", false)
	allowDowngrade := cmd.fs.Bool("allow-downgrade", false, "allow lowering the admission release (re-admits joiners on an older release)")
	if err := cmd.connect(args[2:], 1, usage); err != nil {
		return err
	}
	var out releaseset.AdmissionView
	req := releaseset.SetAdmissionRequest{Release: cmd.fs.Arg(0), AllowDowngrade: *allowDowngrade}
	if err := cmd.do(ctx, "PUT", "/v1/admin/cluster/release", req, &out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "admission release: %s (was %s)\n", out.AdmissionRelease, out.Previous)
	return nil
}
