package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"stratum/iam"
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
	switch args[0] {
	case "list":
		var out struct {
			Sessions []iam.TokenView `json:"sessions"`
		}
		return showAnswer(ctx, "sessions list", args[1:], "/v1/iam/sessions", &out, func() error {
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tUSER\tCREATED\tEXPIRES\tREVOKED")
			for _, s := range out.Sessions {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\n", s.ID, s.Subject, s.CreatedAt.Format(time.RFC3339), s.ExpiresAt.Format(time.RFC3339), s.Revoked)
			}
			return tw.Flush()
		})
	case "revoke":
		cmd := newAdminCommand("sessions revoke", false)
		if err := cmd.connect(args[1:], 1, "usage: stratum sessions revoke SESSION_ID"); err != nil {
			return err
		}
		id := cmd.fs.Arg(0)
		if err := cmd.do(ctx, "DELETE", "/v1/iam/sessions/"+id, nil, nil); err != nil {
			return err
		}
		fmt.Println("ended session", id)
		return nil
	}
	return fmt.Errorf("unknown sessions subcommand %q", args[0])
}

func runLogout(ctx context.Context, args []string) error {
	cmd := newAdminCommand("logout", false)
	if err := cmd.connect(args, -1, ""); err != nil {
		return err
	}
	if err := cmd.do(ctx, "POST", "/v1/auth/logout", nil, nil); err != nil {
		return err
	}
	fmt.Println("logged out")
	return nil
}

func runPassword(ctx context.Context, args []string) error {
	cmd := newAdminCommand("password", false)
	if err := cmd.connect(args, -1, ""); err != nil {
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
	req := iam.PasswordChange{CurrentPassword: lines[0], NewPassword: lines[1]}
	if err := cmd.do(ctx, "POST", "/v1/auth/password", req, nil); err != nil {
		return err
	}
	fmt.Println("password changed; the user's other sessions have ended")
	return nil
}
