// Package cli is the stratum command line, on spf13/cobra. Each command
// lives in its own file and registers its constructor, so adding one
// touches no shared table; the tree is built fresh for every run (and
// every test), and the conventions below apply to every command in it:
// help on stdout, env twins, exit codes, -o on commands that print a
// resource.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"stratum/apierr"
	"stratum/buildinfo"
)

// Exit codes (stratum help exit-codes).
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitUsage    = 2
	ExitAuth     = 3
	ExitTrust    = 4
	ExitNotFound = 5
	ExitConflict = 6
	ExitRetry    = 7
)

const exitCodesHelp = `Every stratum command exits with one of these codes:

  0  ok
  1  error (the message says what failed; fix it and run again)
  2  usage: an unknown command or flag, a missing or extra argument, a bad flag value
  3  not authenticated or not authorized: a wrong password, an expired or
     revoked session (log in with stratum login); the joiner: its join
     token was refused (already used up, expired, revoked or mistyped:
     ask for a new one) or an operator rejected the join
  4  trust failure: the joiner's founder or release failed a check, a
     release tree failed stratum release verify (a founder refusing an
     import or push: 1), the audit chain is broken; the joiner: also
     its join failed (its delivery failed or timed out, or an operator
     cancelled it)
  5  not found
  6  conflict or refused: the state does not allow it, e.g. approving a
     join twice, or stratum backup --out naming a file that exists (pass
     --force to replace it); running again changes nothing until the
     state does
  7  try again later: the founder limits this source (too many wrong
     passwords: stratum login says when to retry) or is busy; the same
     command succeeds once the time the message names has passed

Answers of the admin API map by their error code (SPEC section 2), not by
their text: UNAUTHENTICATED, FORBIDDEN, JOIN_TOKEN_INVALID -> 3; NOT_FOUND -> 5;
CONFLICT, JOIN_APPROVAL_REFUSED, RELEASE_MISMATCH -> 6; TOO_MANY_REQUESTS
-> 7; an answer without a code by its HTTP status (401, 403 -> 3;
404 -> 5; 409 -> 6; 429 -> 7).`

var commands []func() *cobra.Command

// Register adds a top-level command's constructor; called from init
// functions. The constructor runs once per tree, so flag variables are
// never shared between two runs.
func Register(newCmd func() *cobra.Command) { commands = append(commands, newCmd) }

func init() {
	// A command may add its own PersistentPreRunE without losing the
	// root's (which applies the environment twins).
	cobra.EnableTraverseRunHooks = true
}

// ExitError carries a specific process exit code with its message.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// usageError is a command line the command cannot run: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// runError marks an error a command's RunE returned; any other error
// comes from cobra itself (parsing, argument validation): a usage error.
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// NewRoot builds the whole command tree with the conventions applied.
func NewRoot() *cobra.Command {
	b := buildinfo.Current()
	root := &cobra.Command{
		Use:           "stratum",
		Short:         "stratum: the founder appliance, its joiner and the node agent in one binary",
		Version:       b.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnvTwins(cmd)
		},
	}
	root.SetVersionTemplate(fmt.Sprintf("stratum %s (commit %s)\n", b.Version, b.Commit))
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if hint := suggestFlags(c, err); hint != "" {
			return usageError{fmt.Errorf("%w%s", err, hint)}
		}
		return usageError{err}
	})
	root.AddCommand(&cobra.Command{
		Use:   "exit-codes",
		Short: "what each exit code means",
		Long:  exitCodesHelp,
	})
	for _, newCmd := range commands {
		root.AddCommand(newCmd())
	}
	// cobra adds these when it runs; added here, they are in the tree
	// the conventions (and the CLI test) walk. help of an unknown topic
	// is a usage error, not the root's help with exit 0.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "help about any command (stratum help exit-codes: the exit codes)",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 || (len(args) > 0 && cmd == root) {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	conventions(root, root.Version)
	return root
}

// conventions walks the tree: help on stdout, env twins in every flag's
// help, groups that refuse a missing or unknown subcommand, errors of
// RunE marked so the exit code can tell them from usage errors.
func conventions(c *cobra.Command, version string) {
	// --version answers on every command, not only the root.
	c.Version = version
	// "Did you mean" within two edits (cobra's default, which it applies
	// only on the paths it handles itself).
	c.SuggestionsMinimumDistance = 2
	c.Flags().VisitAll(func(f *pflag.Flag) { describeEnvTwin(c, f) })
	if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), suggestCommands(cmd, args[0]))
			}
			return usagef("%q needs a subcommand", cmd.CommandPath())
		}
	}
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return runError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		conventions(sub, version)
	}
}

// Main runs the command line args and returns the exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Execute(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// Execute runs args on a fresh tree with the given input and outputs
// (help and results on stdout, errors on stderr) and returns the exit
// code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	name := "stratum"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	msg := describe(err).Error()
	fmt.Fprintf(stderr, "%s: %s\n", name, msg)
	if e, ok := apierr.As(err); ok && e.Details["mustChangePassword"] == true {
		fmt.Fprintln(stderr, "change the password first: stratum password (it asks for the current and the new one)")
	}
	if code == ExitUsage && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
	}
	return code
}

// exitCode classifies err: its type, never its text.
func exitCode(err error) int {
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	var usage usageError
	if errors.As(err, &usage) {
		return ExitUsage
	}
	var run runError
	if !errors.As(err, &run) {
		// cobra's own: unknown command or flag, wrong argument count.
		return ExitUsage
	}
	if code, ok := apiExitCode(err); ok {
		return code
	}
	return ExitFailed
}
