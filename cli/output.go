package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// outputFormat is -o/--output: table (the default, for people), json or
// yaml (the resource as the API answered it, for scripts).
type outputFormat string

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }
func (o *outputFormat) Set(s string) error {
	switch s {
	case "table", "json", "yaml":
		*o = outputFormat(s)
		return nil
	}
	return fmt.Errorf("%q: want table, json or yaml", s)
}

// printsResource is the annotation of a command that has -o.
const printsResource = "stratum/prints-resource"

// addOutput gives cmd its -o flag; every command that prints a resource
// has one (the CLI test drives -o json on each).
func addOutput(cmd *cobra.Command) *outputFormat {
	o := outputFormat("table")
	cmd.Flags().VarP(&o, "output", "o", "output format: table, json or yaml")
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[printsResource] = "true"
	return &o
}

// render prints raw (an API answer) as JSON or YAML, or decodes it into
// out and calls table.
func (o outputFormat) render(w io.Writer, raw []byte, out any, table func() error) error {
	switch o {
	case "json":
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	case "yaml":
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return err
		}
		return enc.Close()
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return err
		}
	}
	return table()
}
