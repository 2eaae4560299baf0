package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// noEnvTwin are the flags an environment variable must not set: each
// weakens a safety rule, so it has to be typed on the command line where
// the operator sees it (a variable left in a shell would silently allow
// every later downgrade).
var noEnvTwin = map[string]bool{"allow-downgrade": true, "insecure-store-unseal-key": true, "accept-audit-rollback": true, "allow-public-connect": true}

// envTwin names a flag's environment twin: STRATUM_ + the flag name
// (--api-addr -> STRATUM_API_ADDR); "" for a flag that has none. The join
// token is STRATUM_JOIN_TOKEN (its file STRATUM_JOIN_TOKEN_FILE), because
// STRATUM_TOKEN is the admin commands' bearer token and an operator shell
// may hold both.
func envTwin(cmd *cobra.Command, flagName string) string {
	switch {
	case noEnvTwin[flagName], flagName == "help", flagName == "version":
		return ""
	case cmd.Name() == "join" && cmd.HasParent() && !cmd.Parent().HasParent() && flagName == "token":
		return "STRATUM_JOIN_TOKEN"
	case cmd.Name() == "join" && cmd.HasParent() && !cmd.Parent().HasParent() && flagName == "token-file":
		return "STRATUM_JOIN_TOKEN_FILE"
	}
	return "STRATUM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// describeEnvTwin adds the twin to the flag's help line.
func describeEnvTwin(cmd *cobra.Command, f *pflag.Flag) {
	if env := envTwin(cmd, f.Name); env != "" {
		f.Usage += " [env " + env + "]"
	} else if noEnvTwin[f.Name] {
		f.Usage += " [no env twin: type it]"
	}
}

// applyEnvTwins sets every flag not given on the command line from its
// environment twin, before required flags are checked.
func applyEnvTwins(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := envTwin(cmd, f.Name)
		if f.Changed || env == "" || err != nil {
			return
		}
		if v, ok := os.LookupEnv(env); ok {
			if serr := cmd.Flags().Set(f.Name, v); serr != nil {
				err = usageError{fmt.Errorf("%s: %w", env, serr)}
			}
		}
	})
	return err
}
