package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
)

func init() {
	Register(Command{Name: "token", Summary: "join tokens: create | list | revoke", Run: runToken})
}

func runToken(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: stratum token create|list|revoke")
	}
	fs := newFlagSet("token " + args[0])
	af := addAdminFlags(fs)
	switch args[0] {
	case "create":
		role := fs.String("role", "worker", "control-plane, worker or postgres")
		ttl := fs.String("ttl", "24h", "lifetime")
		uses := fs.Int("uses", 1, "registrations it may redeem")
		desc := fs.String("description", "", "free text")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		var out struct {
			TokenID     string `json:"tokenId"`
			Token       string `json:"token"`
			ExpiresAt   string `json:"expiresAt"`
			JoinCommand string `json:"joinCommand"`
		}
		body := map[string]any{"role": *role, "ttl": *ttl, "uses": *uses, "description": *desc}
		if err := c.do(ctx, "POST", "/v1/admin/join/tokens", body, &out); err != nil {
			return err
		}
		fmt.Printf("token %s (expires %s); on the new node run:\n\n  %s\n\n", out.TokenID, out.ExpiresAt, out.JoinCommand)
		return nil
	case "list":
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		var out struct {
			Tokens []map[string]any `json:"tokens"`
		}
		if err := c.do(ctx, "GET", "/v1/admin/join/tokens", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOKEN\tROLE\tUSES LEFT\tEXPIRES\tSTATE\tDESCRIPTION")
		for _, t := range out.Tokens {
			fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\n", t["tokenId"], t["role"], t["usesLeft"], t["expiresAt"], t["state"], t["description"])
		}
		return tw.Flush()
	case "revoke":
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: stratum token revoke TOKEN_ID")
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		if err := c.do(ctx, "DELETE", "/v1/admin/join/tokens/"+fs.Arg(0), nil, nil); err != nil {
			return err
		}
		fmt.Println("revoked", fs.Arg(0))
		return nil
	}
	return fmt.Errorf("unknown token subcommand %q", args[0])
}

// rawJSON prints an API answer as indented JSON.
func rawJSON(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return printJSON(v)
}
