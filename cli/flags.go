package cli

import (
	"errors"
	"flag"
	"os"
	"strings"
)

// newFlagSet returns a flag set whose parse errors are reported once.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("stratum "+name, flag.ContinueOnError)
	return fs
}

// parseFlags parses args, letting every flag default from its STRATUM_*
// environment twin (--api-addr -> STRATUM_API_ADDR) first.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "STRATUM_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = errors.New(env + ": " + err.Error())
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errUsage
		}
		return errUsage
	}
	return nil
}
