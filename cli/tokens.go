package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"stratum/join"
)

func init() {
	Register(Command{Name: "token", Summary: "join tokens: create | list | revoke", Run: runToken})
}

func runToken(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: stratum token create|list|revoke")
	}
	switch args[0] {
	case "create":
		return tokenCreate(ctx, args[1:])
	case "list":
		return tokenList(ctx, args[1:])
	case "revoke":
		return tokenRevoke(ctx, args[1:])
	}
	return fmt.Errorf("unknown token subcommand %q", args[0])
}

func tokenCreate(ctx context.Context, args []string) error {
	cmd := newAdminCommand("token create", false)
	role := cmd.fs.String("role", "worker", "control-plane, worker or postgres")
	ttl := cmd.fs.String("ttl", "24h", "lifetime")
	uses := cmd.fs.Int("uses", 1, "registrations it may redeem")
	desc := cmd.fs.String("description", "", "free text")
	if err := cmd.connect(args, -1, ""); err != nil {
		return err
	}
	var out join.CreatedToken
	req := join.CreateTokenRequest{Role: *role, TTL: *ttl, Uses: *uses, Description: *desc}
	if err := cmd.do(ctx, "POST", "/v1/admin/join/tokens", req, &out); err != nil {
		return err
	}
	fmt.Printf("token %s (expires %s); on the new node run:\n\n  %s\n\n", out.TokenID, out.ExpiresAt.Format(time.RFC3339), out.JoinCommand)
	return nil
}

func tokenList(ctx context.Context, args []string) error {
	var out struct {
		Tokens []join.TokenView `json:"tokens"`
	}
	return showAnswer(ctx, "token list", args, "/v1/admin/join/tokens", &out, func() error {
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOKEN\tROLE\tUSES LEFT\tEXPIRES\tSTATE\tDESCRIPTION")
		for _, t := range out.Tokens {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", t.TokenID, t.Role, t.UsesLeft, t.ExpiresAt.Format(time.RFC3339), t.State, t.Description)
		}
		return tw.Flush()
	})
}

func tokenRevoke(ctx context.Context, args []string) error {
	cmd := newAdminCommand("token revoke", false)
	if err := cmd.connect(args, 1, "usage: stratum token revoke TOKEN_ID"); err != nil {
		return err
	}
	id := cmd.fs.Arg(0)
	if err := cmd.do(ctx, "DELETE", "/v1/admin/join/tokens/"+id, nil, nil); err != nil {
		return err
	}
	fmt.Println("revoked", id)
	return nil
}
