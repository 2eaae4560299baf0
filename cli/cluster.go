package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
)

func init() {
	Register(Command{Name: "cluster", Summary: "cluster settings: release set V [--allow-downgrade]", Run: runCluster})
}

// runCluster: `stratum cluster release set V [--allow-downgrade]` sets
// the admission release joiners are admitted on (SPEC 10.2).
func runCluster(ctx context.Context, args []string) error {
	if len(args) < 2 || args[0] != "release" || args[1] != "set" {
		return errors.New("usage: stratum cluster release set VERSION [--allow-downgrade]")
	}
	fs := newFlagSet("cluster release set")
	af := addAdminFlags(fs)
	allowDowngrade := fs.Bool("allow-downgrade", false, "allow lowering the admission release (re-admits joiners on an older release)")
	if err := parseFlags(fs, args[2:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: stratum cluster release set VERSION [--allow-downgrade]")
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	var out struct {
		AdmissionRelease string `json:"admissionRelease"`
		Previous         string `json:"previous"`
	}
	body := map[string]any{"release": fs.Arg(0), "allowDowngrade": *allowDowngrade}
	if err := c.do(ctx, "PUT", "/v1/admin/cluster/release", body, &out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "admission release: %s (was %s)\n", out.AdmissionRelease, out.Previous)
	return nil
}
