package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

func init() {
	Register(Command{Name: "sessions", Summary: "login sessions: list | revoke SESSION_ID", Run: runSessions})
	Register(Command{Name: "logout", Summary: "end the login session in STRATUM_TOKEN / --token-file", Run: runLogout})
	Register(Command{Name: "password", Summary: "change the logged-in user's password (reads the current and the new one from stdin, one a line); ends the user's other sessions", Run: runPassword})
}

func runSessions(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: stratum sessions list|revoke SESSION_ID")
	}
	fs, c, err := adminCommand("sessions "+args[0], args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		var out struct {
			Sessions []map[string]any `json:"sessions"`
		}
		if err := c.do(ctx, "GET", "/v1/iam/sessions", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tUSER\tCREATED\tEXPIRES\tREVOKED")
		for _, s := range out.Sessions {
			fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\n", s["tokenId"], s["subject"], s["createdAt"], s["expiresAt"], s["revoked"])
		}
		return tw.Flush()
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New("usage: stratum sessions revoke SESSION_ID")
		}
		if err := c.do(ctx, "DELETE", "/v1/iam/sessions/"+fs.Arg(0), nil, nil); err != nil {
			return err
		}
		fmt.Println("ended session", fs.Arg(0))
		return nil
	}
	return fmt.Errorf("unknown sessions subcommand %q", args[0])
}

// adminCommand parses a command that takes only the admin flags and
// returns its client.
func adminCommand(name string, args []string) (*flag.FlagSet, *adminClient, error) {
	fs := newFlagSet(name)
	af := addAdminFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	c, err := af.client()
	return fs, c, err
}

func runLogout(ctx context.Context, args []string) error {
	_, c, err := adminCommand("logout", args)
	if err != nil {
		return err
	}
	if err := c.do(ctx, "POST", "/v1/auth/logout", nil, nil); err != nil {
		return err
	}
	fmt.Println("logged out")
	return nil
}

func runPassword(ctx context.Context, args []string) error {
	_, c, err := adminCommand("password", args)
	if err != nil {
		return err
	}
	// Passwords come from stdin, never from flags that ps would show.
	sc := bufio.NewScanner(os.Stdin)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
	}
	if len(lines) < 2 {
		return errors.New("give the current password and the new one on stdin, one a line")
	}
	body := map[string]string{"currentPassword": lines[0], "newPassword": lines[1]}
	if err := c.do(ctx, "POST", "/v1/auth/password", body, nil); err != nil {
		return err
	}
	fmt.Println("password changed; the user's other sessions have ended")
	return nil
}
