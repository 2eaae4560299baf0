package cli

import (
	"github.com/spf13/cobra"

	"stratum/founder"
)

func init() { Register(newOpenBaoCmd) }

// newOpenBaoCmd is `stratum openbao converge`: the running founder does
// the work (founder.DataDir.ConvergeOpenBao, through its control socket);
// this reads nothing but the flags and prints the answer.
func newOpenBaoCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "openbao", Short: "the cluster's OpenBao: converge replaces the founder's root token with a scoped one"}
	converge := &cobra.Command{
		Use:   "converge --root-token-file FILE [--data DIR]",
		Short: "write the stratum-cp and stratum-node policies and give the founder a periodic stratum-cp token (the root token is used once, never kept)",
		Args:  cobra.NoArgs,
	}
	data := converge.Flags().String("data", "./data", "data directory of the running founder")
	rootFile := converge.Flags().String("root-token-file", "", "file holding an OpenBao root token; used once, never stored")
	_ = converge.MarkFlagRequired("root-token-file")
	converge.RunE = func(cmd *cobra.Command, _ []string) error {
		msg, err := founder.DataDir(*data).ConvergeOpenBao(cmd.Context(), *rootFile)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write([]byte(msg))
		return err
	}
	cmd.AddCommand(converge)
	return cmd
}
