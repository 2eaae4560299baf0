// Package refdoc writes the reference pages under docs/reference from
// their sources, so they cannot say what the binary does not: the CLI
// pages from the cobra command tree (cli.NewRoot, through cobra's own
// markdown generator) and the API pages from the OpenAPI document the
// routes generate (httpapi/openapi.json). `make docs` runs it; its test
// fails when the committed pages differ from what it writes.
package refdoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"stratum/cli"
)

// OpenAPISource is the OpenAPI document, relative to the module root.
const OpenAPISource = "httpapi/openapi.json"

// Write regenerates the reference under dir (docs/reference), reading
// the OpenAPI document from root (the module root). It removes the
// pages it owns first, so a removed command leaves no page behind.
func Write(root, dir string) error {
	cliDir := filepath.Join(dir, "cli")
	if err := os.RemoveAll(cliDir); err != nil {
		return err
	}
	if err := os.MkdirAll(cliDir, 0o755); err != nil {
		return err
	}
	if err := writeCLI(cliDir); err != nil {
		return fmt.Errorf("cli reference: %w", err)
	}
	spec, err := os.ReadFile(filepath.Join(root, OpenAPISource))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), spec, 0o644); err != nil {
		return err
	}
	page, err := apiPage(spec)
	if err != nil {
		return fmt.Errorf("api reference: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "api.md"), page, 0o644)
}

// writeCLI writes one page per command, named as cobra names them
// (stratum_release_push.md), and an index (README.md).
func writeCLI(dir string) error {
	root := cli.NewRoot()
	// No generation date in the pages: the same tree writes the same
	// bytes, which is what the staleness test compares.
	root.DisableAutoGenTag = true
	machineFreeDefaults(root)
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return err
	}
	// Help topics (a command with no run, such as exit-codes) are left
	// out by the tree generator; their pages are written one by one.
	for _, c := range root.Commands() {
		if c.IsAdditionalHelpTopicCommand() {
			f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "_")+".md"))
			if err != nil {
				return err
			}
			err = doc.GenMarkdown(c, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	var b strings.Builder
	b.WriteString("# CLI reference\n\n")
	b.WriteString("Generated from the command tree by `make docs` (cobra's markdown generator); " +
		"`stratum COMMAND --help` prints the same text. Every flag has a `STRATUM_*` environment twin, " +
		"named in its help, except the few that weaken a safety rule. Exit codes: " +
		"[stratum help exit-codes](stratum_exit-codes.md).\n\n")
	b.WriteString("| command | what |\n|---|---|\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c != root && !c.IsAdditionalHelpTopicCommand() {
			return
		}
		if c != root {
			name := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
			fmt.Fprintf(&b, "| [`%s`](%s) | %s |\n", c.CommandPath(), name, cell(c.Short))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(b.String()), 0o644)
}

// machineDefault names the flags whose default is computed from the
// machine that runs the command (the release cache: a share of its
// memory); their help says how, and the pages show no figure, so that
// they read the same whichever machine wrote them.
var machineDefault = map[string]bool{"release-cache": true}

func machineFreeDefaults(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if machineDefault[f.Name] {
			f.DefValue = ""
		}
	})
	for _, sub := range c.Commands() {
		machineFreeDefaults(sub)
	}
}

// The parts of the OpenAPI document the page shows.
type (
	openAPI struct {
		Info struct {
			Title       string `json:"title"`
			Description string `json:"description"`
		} `json:"info"`
		Paths      map[string]map[string]operation `json:"paths"`
		Components struct {
			Schemas         map[string]schema `json:"schemas"`
			SecuritySchemes map[string]struct {
				Description string `json:"description"`
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	operation struct {
		Summary     string                `json:"summary"`
		Auth        string                `json:"x-auth"`
		Action      string                `json:"x-action"`
		Listeners   []string              `json:"x-listeners"`
		Security    []map[string][]string `json:"security"`
		Parameters  []parameter           `json:"parameters"`
		RequestBody *struct {
			Content map[string]json.RawMessage `json:"content"`
		} `json:"requestBody"`
		Responses map[string]struct {
			Description string `json:"description"`
		} `json:"responses"`
	}
	parameter struct {
		Name        string `json:"name"`
		In          string `json:"in"`
		Required    bool   `json:"required"`
		Description string `json:"description"`
	}
	schema struct {
		Properties map[string]struct {
			Type        string   `json:"type"`
			Description string   `json:"description"`
			Enum        []string `json:"enum"`
			Ref         string   `json:"$ref"`
			Items       *struct {
				Ref string `json:"$ref"`
			} `json:"items"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
)

var methodOrder = []string{"get", "head", "post", "put", "patch", "delete"}

// listeners, in the order the page shows them.
var listeners = []struct{ name, title string }{
	{"admin", "Admin listener (`--api-addr`, default :8443)"},
	{"join", "Join listener (`--join-addr`, default :9443)"},
}

// apiPage renders the OpenAPI document as one markdown page: a table of
// the operations per listener, then each operation, then the error
// envelope.
func apiPage(spec []byte) ([]byte, error) {
	var d openAPI
	if err := json.Unmarshal(spec, &d); err != nil {
		return nil, err
	}
	type op struct {
		method, path string
		operation
	}
	var ops []op
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		for _, m := range methodOrder {
			if o, ok := d.Paths[p][m]; ok {
				ops = append(ops, op{strings.ToUpper(m), p, o})
			}
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# API reference\n\n")
	fmt.Fprintf(&b, "%s\n\n", d.Info.Description)
	fmt.Fprintf(&b, "Generated by `make docs` from [`%s`](../../%s), the OpenAPI 3 document a founder also serves at `GET /openapi.json`; "+
		"a copy sits beside this page ([openapi.json](openapi.json)).\n\n", OpenAPISource, OpenAPISource)
	b.WriteString("Authentication (`auth` below):\n\n")
	auths := map[string][]string{} // x-auth -> its security schemes' descriptions
	for _, o := range ops {
		if _, seen := auths[o.Auth]; seen {
			continue
		}
		descs := []string{}
		for _, req := range o.Security {
			for name := range req {
				desc := strings.TrimSuffix(d.Components.SecuritySchemes[name].Description, ".")
				if len(descs) > 0 && desc != "" {
					desc = strings.ToLower(desc[:1]) + desc[1:]
				}
				descs = append(descs, desc)
			}
		}
		auths[o.Auth] = descs
	}
	authNames := make([]string, 0, len(auths))
	for a := range auths {
		authNames = append(authNames, a)
	}
	sort.Strings(authNames)
	for _, a := range authNames {
		desc := "no credentials"
		if len(auths[a]) > 0 {
			desc = strings.Join(auths[a], "; or ")
		}
		fmt.Fprintf(&b, "- `%s`: %s.\n", a, desc)
	}
	b.WriteString("\n")
	b.WriteString("`action` is what the caller's policy must allow (`stratum` IAM actions).\n\n")
	for _, l := range listeners {
		fmt.Fprintf(&b, "## %s\n\n| method | path | auth | action | summary |\n|---|---|---|---|---|\n", l.title)
		for _, o := range ops {
			if !contains(o.Listeners, l.name) {
				continue
			}
			fmt.Fprintf(&b, "| %s | [`%s`](#%s) | %s | %s | %s |\n", o.method, o.path, anchor(o.method, o.path),
				o.Auth, code(o.Action), cell(o.Summary))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Operations\n\n")
	for _, o := range ops {
		fmt.Fprintf(&b, "### %s %s\n\n%s\n\n", o.method, o.path, o.Summary)
		fmt.Fprintf(&b, "- listeners: %s; auth: %s", strings.Join(o.Listeners, ", "), o.Auth)
		if o.Action != "" {
			fmt.Fprintf(&b, "; action: `%s`", o.Action)
		}
		b.WriteString("\n")
		if o.RequestBody != nil {
			types := make([]string, 0, len(o.RequestBody.Content))
			for t := range o.RequestBody.Content {
				types = append(types, "`"+t+"`")
			}
			sort.Strings(types)
			fmt.Fprintf(&b, "- request body: %s\n", strings.Join(types, ", "))
		}
		b.WriteString("\n")
		if len(o.Parameters) > 0 {
			b.WriteString("| parameter | in | required | description |\n|---|---|---|---|\n")
			for _, p := range o.Parameters {
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p.Name, p.In, yes(p.Required), cell(p.Description))
			}
			b.WriteString("\n")
		}
		statuses := make([]string, 0, len(o.Responses))
		for s := range o.Responses {
			statuses = append(statuses, s)
		}
		sort.Strings(statuses) // "default" sorts after the numbers
		b.WriteString("| status | meaning |\n|---|---|\n")
		for _, s := range statuses {
			fmt.Fprintf(&b, "| %s | %s |\n", s, cell(o.Responses[s].Description))
		}
		b.WriteString("\n")
	}
	b.WriteString("## The error envelope\n\n")
	names := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := d.Components.Schemas[n]
		fmt.Fprintf(&b, "### %s\n\n| field | type | required | description |\n|---|---|---|---|\n", n)
		props := make([]string, 0, len(s.Properties))
		for p := range s.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		for _, p := range props {
			f := s.Properties[p]
			typ := f.Type
			switch {
			case f.Ref != "":
				typ = strings.TrimPrefix(f.Ref, "#/components/schemas/")
			case f.Items != nil && f.Items.Ref != "":
				typ = "array of " + strings.TrimPrefix(f.Items.Ref, "#/components/schemas/")
			}
			desc := f.Description
			if len(f.Enum) > 0 {
				desc = strings.TrimSpace(desc + " One of " + code(strings.Join(f.Enum, "`, `")) + ".")
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p, typ, yes(contains(s.Required, p)), cell(desc))
		}
		b.WriteString("\n")
	}
	return b.Bytes(), nil
}

// anchor is the id GitHub-style renderers give "### METHOD /path".
func anchor(method, path string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(method + " " + path) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
