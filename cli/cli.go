// Package cli dispatches the stratum subcommands. Each subcommand lives in
// its own file and registers itself, so adding one touches no shared table.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"stratum/apierr"
)

// Command is one top-level subcommand.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string) error
}

var commands = map[string]Command{}

// Register adds a subcommand; called from init functions.
func Register(c Command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: duplicate command " + c.Name)
	}
	commands[c.Name] = c
}

// ExitError carries a specific process exit code with its message.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs the subcommand named by args[0] and returns the exit code.
func Main(args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "stratum: unknown command %q\n\n", args[0])
		usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.Run(ctx, args[1:]); err != nil {
		if errors.Is(err, errUsage) {
			return 2
		}
		if e, ok := err.(*apierr.Error); ok {
			// An admin API's answer: its message and field problems.
			err = describe(e)
		}
		fmt.Fprintf(os.Stderr, "stratum %s: %v\n", cmd.Name, err)
		var exit *ExitError
		if errors.As(err, &exit) {
			return exit.Code
		}
		return 1
	}
	return 0
}

// errUsage reports a flag parsing failure whose message the flag package
// already printed.
var errUsage = errors.New("usage")

func usage() {
	fmt.Fprintln(os.Stderr, "usage: stratum <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", n, commands[n].Summary)
	}
}
