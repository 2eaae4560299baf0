package cli

import (
	"fmt"
	"strings"

	"stratum/apierr"
)

// describe renders an *apierr.Error with its field problems for a terminal.
func describe(err error) error {
	e, ok := apierr.As(err)
	if !ok {
		return err
	}
	var b strings.Builder
	b.WriteString(e.Message)
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Message)
	}
	for _, i := range e.Issues {
		fmt.Fprintf(&b, "\n  statement %d: %s %s", i.Statement, i.Code, i.Action)
	}
	return fmt.Errorf("%s", b.String())
}
