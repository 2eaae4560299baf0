package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagHelpNamesItsValue: pflag takes a back-quoted word of a flag's
// usage as the name of its value, so `--in FILE` would read
// "--in stratum backup   backup file written by stratum backup" in
// --help. No usage of any command has one.
func TestFlagHelpNamesItsValue(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: a back quote in its usage names its value in --help: %q", c.CommandPath(), f.Name, f.Usage)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewRoot())
}
