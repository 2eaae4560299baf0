package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"stratum/wire"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"stratum/apierr"
	"stratum/iam"
)

func init() {
	Register(newSessionsCmd)
	Register(newLoginCmd)
	Register(newLogoutCmd)
	Register(newPasswordCmd)
}

// newSessionsListCmd: the table marks with * the session this command
// itself uses, the one `sessions revoke` would end under the operator's
// feet.
func newSessionsListCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "list the login sessions that have not expired (ended ones too, marked REVOKED); * marks this one", Args: cobra.NoArgs}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		raw, err := c.get(cmd.Context(), "/v1/iam/sessions")
		if err != nil {
			return err
		}
		var list struct {
			Sessions []wire.TokenView `json:"sessions"`
		}
		current, _ := iam.TokenID(c.token)
		return o.render(cmd.OutOrStdout(), raw, &list, func() error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tSESSION\tUSER\tCREATED\tEXPIRES\tREVOKED")
			for _, s := range list.Sessions {
				mark := ""
				if s.ID == current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\n", mark, s.ID, s.Subject, s.CreatedAt.Format(time.RFC3339), s.ExpiresAt.Format(time.RFC3339), s.Revoked)
			}
			return tw.Flush()
		})
	}
	return cmd
}

func newSessionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "login sessions: list | revoke SESSION_ID"}
	cmd.AddCommand(newSessionsListCmd())
	revoke := &cobra.Command{Use: "revoke SESSION_ID", Short: "end a login session (and every token made under it)", Args: cobra.ExactArgs(1)}
	admin := addAdminFlags(revoke)
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		if err := c.do(cmd.Context(), "DELETE", "/v1/iam/sessions/"+url.PathEscape(args[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), "ended session", args[0])
		return nil
	}
	cmd.AddCommand(revoke)
	return cmd
}

func newLoginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login",
		Short: "log in to the admin API and keep the session for the other commands",
		Long: `Log in with an email and password. The password is asked without echo on a
terminal, or read from the first line of stdin with --password-stdin (never
a flag: ps would show it). The session token is kept per API URL in
$XDG_CONFIG_HOME/stratum/credentials (default ~/.config; mode 0600), and
every admin command uses it when neither STRATUM_TOKEN nor --token-file is
given.`,
		Example: `  stratum login --api https://127.0.0.1:8443 --email admin@example.com
  stratum login --email "$EMAIL" --password-stdin <password.txt`,
		Args: cobra.NoArgs,
	}
	admin := addAdminFlags(cmd)
	_ = cmd.Flags().MarkHidden("token-file")
	email := cmd.Flags().String("email", "", "the user's email (asked on a terminal when not given)")
	fromStdin := cmd.Flags().Bool("password-stdin", false, "read the password from the first line of stdin")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := admin.anonymous()
		if err != nil {
			return err
		}
		in := bufio.NewReader(cmd.InOrStdin())
		tty := isTerminal(cmd.InOrStdin())
		if *email == "" {
			if *fromStdin || !tty {
				return usagef("--email is required with --password-stdin or without a terminal")
			}
			fmt.Fprint(cmd.ErrOrStderr(), "email: ")
			line, err := in.ReadString('\n')
			if err != nil {
				return fmt.Errorf("read the email: %w", err)
			}
			*email = strings.TrimSpace(line)
		}
		var password string
		switch {
		case *fromStdin:
			line, err := in.ReadString('\n')
			if err != nil && (err != io.EOF || line == "") {
				return fmt.Errorf("read the password from stdin: %w", err)
			}
			password = strings.TrimRight(line, "\r\n")
		case tty:
			password, err = askSecret(cmd, "password for "+*email+": ")
			if err != nil {
				return err
			}
		default:
			return usagef("stdin is not a terminal: give --password-stdin to read the password from it")
		}
		if password == "" {
			return usagef("empty password")
		}
		var ans wire.LoginResponse
		err = c.do(cmd.Context(), "POST", "/v1/auth/login", wire.LoginRequest{Email: *email, Password: password}, &ans)
		if e, ok := apierr.As(err); ok && e.Code == apierr.TooManyRequests {
			wait := time.Duration(max(e.RetryAfter, 1)) * time.Second
			return &ExitError{Code: ExitRetry, Err: fmt.Errorf("%s: retry in %s (after %s)", e.Message, wait, time.Now().Add(wait).Format("15:04:05"))}
		}
		if err != nil {
			return err
		}
		creds, err := loadCredentials()
		if err != nil {
			return err
		}
		caFile, err := filepath.Abs(admin.caFile)
		if err != nil {
			return err
		}
		creds.Sessions[c.base] = session{Token: ans.Token, Email: *email, ExpiresAt: ans.ExpiresAt, CAFile: caFile}
		path, err := creds.save()
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "logged in to %s as %s until %s (session kept in %s)\n", c.base, *email, ans.ExpiresAt.Local().Format(time.RFC3339), path)
		if !ans.MustChangePassword {
			return nil
		}
		// SPEC 16.1: only the password change (and logout) work until
		// this account's password is changed.
		if *fromStdin || !tty {
			fmt.Fprintf(out, "this account must change its password before anything else: run `stratum password --api %s` (the current and the new password on stdin, one a line)\n", c.base)
			return nil
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "this account must change its password before anything else")
		c.token = ans.Token
		return changePassword(cmd, c, password)
	}
	return cmd
}

// changePassword asks for the new password twice on the terminal and
// changes it; current is the one just typed, or "" to ask for it too.
func changePassword(cmd *cobra.Command, c *adminClient, current string) error {
	req := wire.PasswordChange{CurrentPassword: current}
	var err error
	if req.CurrentPassword == "" {
		if req.CurrentPassword, err = askSecret(cmd, "current password: "); err != nil {
			return err
		}
	}
	if req.NewPassword, err = askSecret(cmd, "new password: "); err != nil {
		return err
	}
	again, err := askSecret(cmd, "new password again: ")
	if err != nil {
		return err
	}
	if again != req.NewPassword {
		return errors.New("the two new passwords differ; nothing changed (run stratum password to try again)")
	}
	if err := c.do(cmd.Context(), "POST", "/v1/auth/password", req, nil); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), "password changed; the user's other sessions have ended")
	return nil
}

// isTerminal reports whether in is a terminal (where a password is
// asked without echo).
func isTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// askSecret reads a line from the terminal without echo.
func askSecret(cmd *cobra.Command, prompt string) (string, error) {
	fmt.Fprint(cmd.ErrOrStderr(), prompt)
	f, ok := cmd.InOrStdin().(*os.File)
	if !ok {
		return "", errors.New("no terminal to ask the password on")
	}
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(cmd.ErrOrStderr())
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	return string(b), nil
}

func newLogoutCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "end the login session (STRATUM_TOKEN, --token-file, or the one stratum login kept) and forget it",
		Args:  cobra.NoArgs,
	}
	admin := addAdminFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		serverErr := c.do(cmd.Context(), "POST", "/v1/auth/logout", nil, nil)
		creds, err := loadCredentials()
		if err != nil {
			return err
		}
		forgot := false
		if s, ok := creds.Sessions[c.base]; ok && s.Token == c.token {
			// Forgotten even when the founder no longer knows it (it
			// expired or was revoked): the file must not keep it.
			delete(creds.Sessions, c.base)
			if _, err := creds.save(); err != nil {
				return err
			}
			forgot = true
		}
		if serverErr != nil && !(forgot && apierr.CodeOf(serverErr) == apierr.Unauthenticated) {
			return serverErr
		}
		fmt.Fprintln(cmd.OutOrStdout(), "logged out of", c.base)
		return nil
	}
	return cmd
}

func newPasswordCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "password",
		Short: "change the logged-in user's password; ends the user's other sessions",
		Long: `Change the logged-in user's password. On a terminal it asks for the current
and the new password without echo; otherwise it reads them from stdin, one
a line (never flags: ps would show them).`,
		Args: cobra.NoArgs,
	}
	admin := addAdminFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		if isTerminal(cmd.InOrStdin()) {
			return changePassword(cmd, c, "")
		}
		sc := bufio.NewScanner(cmd.InOrStdin())
		var lines []string
		for len(lines) < 2 && sc.Scan() {
			lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
		}
		if len(lines) < 2 {
			return usagef("give the current password and the new one on stdin, one a line")
		}
		req := wire.PasswordChange{CurrentPassword: lines[0], NewPassword: lines[1]}
		if err := c.do(cmd.Context(), "POST", "/v1/auth/password", req, nil); err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), "password changed; the user's other sessions have ended")
		return nil
	}
	return cmd
}
