package cli

import (
	"encoding/json"
	"fmt"
	"stratum/wire"

	"github.com/spf13/cobra"
)

func init() { Register(newClusterCmd) }

// newClusterCmd: `stratum cluster release set V [--allow-downgrade]` sets
// the admission release joiners are admitted on (SPEC 10.2).
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "cluster settings"}
	rel := &cobra.Command{Use: "release", Short: "the admission release"}
	set := &cobra.Command{
		Use:   "set VERSION",
		Short: "set the release joiners are admitted on",
		Args:  cobra.ExactArgs(1),
	}
	admin := addAdminFlags(set)
	o := addOutput(set)
	allowDowngrade := set.Flags().Bool("allow-downgrade", false, "allow lowering the admission release (re-admits joiners on an older release)")
	set.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		req := wire.SetAdmissionRequest{Release: args[0], AllowDowngrade: *allowDowngrade}
		if err := c.do(cmd.Context(), "PUT", "/v1/admin/cluster/release", req, &raw); err != nil {
			return err
		}
		var out wire.AdmissionView
		return o.render(cmd.OutOrStdout(), raw, &out, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "admission release: %s (was %s)\n", out.AdmissionRelease, out.Previous)
			return err
		})
	}
	rel.AddCommand(set)
	cmd.AddCommand(rel)
	return cmd
}
