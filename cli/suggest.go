package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// "Did you mean" for a mistyped subcommand (cobra's own suggestions,
// within SuggestionsMinimumDistance edits or a prefix) and a mistyped
// flag (the flags of that command within the same distance, or that it
// is a prefix of).

// suggestCommands is the hint for an unknown subcommand of cmd: "" or
// "\n\nDid you mean this?\n\tNAME...".
func suggestCommands(cmd *cobra.Command, typed string) string {
	return didYouMean(cmd.SuggestionsFor(typed))
}

// suggestFlags is the hint for err when it is pflag's unknown flag
// error: --NAME, or -NAME (a long flag typed with one dash, read as
// shorthands, the common mistake: suggested from what follows the dash).
func suggestFlags(cmd *cobra.Command, err error) string {
	var missing *pflag.NotExistError
	if !errors.As(err, &missing) {
		return ""
	}
	typed := missing.GetSpecifiedName()
	if short := missing.GetSpecifiedShortnames(); short != "" {
		typed = short
	}
	if len(typed) < 2 {
		return ""
	}
	typed, _, _ = strings.Cut(typed, "=")
	minDistance := cmd.SuggestionsMinimumDistance
	if minDistance <= 0 {
		minDistance = 2
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if levenshtein(typed, f.Name) <= minDistance || strings.HasPrefix(f.Name, typed) {
			names = append(names, "--"+f.Name)
		}
	})
	return didYouMean(names)
}

func didYouMean(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("\n\nDid you mean this?\n\t%s", strings.Join(names, "\n\t"))
}

// levenshtein is the edit distance of a and b (case-insensitive, as
// cobra's own for commands).
func levenshtein(a, b string) int {
	ra, rb := []rune(strings.ToLower(a)), []rune(strings.ToLower(b))
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}
