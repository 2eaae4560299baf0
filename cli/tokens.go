package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"stratum/wire"

	"github.com/spf13/cobra"
)

func init() { Register(newTokenCmd) }

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "join tokens: create | list | revoke"}
	cmd.AddCommand(newTokenCreateCmd())
	var list struct {
		Tokens []wire.JoinTokenView `json:"tokens"`
	}
	cmd.AddCommand(showCommand("list", "list join tokens (no secrets)", cobra.NoArgs, fixed("/v1/admin/join/tokens"), &list, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOKEN\tROLE\tUSES LEFT\tEXPIRES\tSTATE\tDESCRIPTION")
		for _, t := range list.Tokens {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", t.TokenID, t.Role, t.UsesLeft, t.ExpiresAt.Format(time.RFC3339), t.State, t.Description)
		}
		return tw.Flush()
	}))
	revoke := &cobra.Command{Use: "revoke TOKEN_ID", Short: "revoke a join token", Args: cobra.ExactArgs(1)}
	admin := addAdminFlags(revoke)
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		if err := c.do(cmd.Context(), "DELETE", "/v1/admin/join/tokens/"+url.PathEscape(args[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), "revoked", args[0])
		return nil
	}
	cmd.AddCommand(revoke)
	return cmd
}

func newTokenCreateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "create a join token and print the command to run on the new node",
		Args:  cobra.NoArgs,
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	var req wire.JoinTokenRequest
	cmd.Flags().StringVar(&req.Role, "role", "worker", "control-plane, worker or postgres")
	cmd.Flags().StringVar(&req.TTL, "ttl", "24h", "lifetime")
	cmd.Flags().IntVar(&req.Uses, "uses", 1, "registrations it may redeem")
	cmd.Flags().StringVar(&req.Description, "description", "", "free text")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := c.do(cmd.Context(), "POST", "/v1/admin/join/tokens", req, &raw); err != nil {
			return err
		}
		var out wire.JoinToken
		return o.render(cmd.OutOrStdout(), raw, &out, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "token %s (expires %s); on the new node run:\n\n  %s\n\n", out.TokenID, out.ExpiresAt.Format(time.RFC3339), out.JoinCommand)
			return err
		})
	}
	return cmd
}
