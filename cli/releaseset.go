package cli

import (
	"io"

	"github.com/spf13/cobra"

	"stratum/releaseset"
)

func init() { Register(newReleaseSetCmd) }

func newReleaseSetCmd() *cobra.Command {
	var set releaseset.Set
	return showCommand("release-set", "every node's release, skew and drift", cobra.NoArgs, fixed("/v1/admin/upgrades/release"), &set, func(w io.Writer) error {
		return releaseset.WriteTable(w, set)
	})
}
