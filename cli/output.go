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
		// json.Indent keeps the answer's own trailing newline: trimmed,
		// so the document ends with exactly one.
		var b bytes.Buffer
		if err := json.Indent(&b, bytes.TrimSpace(raw), "", "  "); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	case "yaml":
		// Numbers as the API wrote them: decoded into float64, an
		// integer such as a byte count would print as 2.5e+10.
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return err
		}
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(yamlNumbers(v)); err != nil {
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

// yamlNumbers replaces each json.Number in v (as decoded with UseNumber)
// by an int64 when it is one, else a float64: the YAML encoder would
// write a json.Number as a quoted string.
func yamlNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return v.String()
	case map[string]any:
		for k, e := range v {
			v[k] = yamlNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = yamlNumbers(e)
		}
	}
	return v
}

// plural is n with its noun: "1 release", "3 releases".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
