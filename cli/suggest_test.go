package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDidYouMean: a mistyped command or flag is a usage error (exit 2)
// whose message suggests what was meant; a word near nothing suggests
// nothing.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the suggestion, "" for none
	}{
		{[]string{"jion"}, "\n\tjoin\n"},
		{[]string{"relase", "list"}, "\n\trelease\n"},
		{[]string{"release", "lst"}, "\n\tlist\n"},
		{[]string{"members", "--ouput", "json"}, "\n\t--output\n"},
		{[]string{"join", "--relase", "0.1.0"}, "\n\t--release\n"},
		{[]string{"token", "create", "--rol=worker"}, "\n\t--role\n"},
		{[]string{"release", "list", "-data", "x"}, "\n\t--data\n"},
		{[]string{"zzzzzzzz"}, ""},
		{[]string{"members", "--zzzzzzzz"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Execute(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			if code != ExitUsage || out.Len() != 0 {
				t.Fatalf("exit %d (want %d), stdout %q", code, ExitUsage, out.String())
			}
			switch {
			case tc.want == "" && strings.Contains(errb.String(), "Did you mean"):
				t.Errorf("a suggestion for a word near nothing:\n%s", errb.String())
			case tc.want != "" && (!strings.Contains(errb.String(), "Did you mean this?") || !strings.Contains(errb.String(), tc.want)):
				t.Errorf("no suggestion %q:\n%s", strings.TrimSpace(tc.want), errb.String())
			}
		})
	}
}
