package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"stratum/apierr"
)

// adminClient is the thin client the operator commands share.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

// adminCommand is the shape every operator command shares: its flag set
// with the admin flags (--api, --ca-file, --token-file) and, for a
// command that shows an answer, --json; then one client.
type adminCommand struct {
	fs      *flag.FlagSet
	flags   adminFlags
	jsonOut *bool
	*adminClient
}

// newAdminCommand starts the flag set of an operator command; shows adds
// --json (print the answer as it came).
func newAdminCommand(name string, shows bool) *adminCommand {
	fs := newFlagSet(name)
	cmd := &adminCommand{fs: fs, flags: addAdminFlags(fs)}
	if shows {
		cmd.jsonOut = fs.Bool("json", false, "print the raw JSON")
	}
	return cmd
}

// connect parses args and builds the client. A usage given with args >= 0
// is the error when the positional arguments are not that many.
func (cmd *adminCommand) connect(args []string, positional int, usage string) error {
	if err := parseFlags(cmd.fs, args); err != nil {
		return err
	}
	if positional >= 0 && cmd.fs.NArg() != positional {
		return errors.New(usage)
	}
	c, err := cmd.flags.client()
	if err != nil {
		return err
	}
	cmd.adminClient = c
	return nil
}

// show GETs path. With --json it prints the answer as it came and
// reports printed; otherwise it decodes the answer into out (a wire type
// of the domain) for the caller to render.
func (cmd *adminCommand) show(ctx context.Context, path string, out any) (printed bool, err error) {
	var raw json.RawMessage
	if err := cmd.do(ctx, "GET", path, nil, &raw); err != nil {
		return false, err
	}
	if cmd.jsonOut != nil && *cmd.jsonOut {
		return true, rawJSON(raw)
	}
	return false, json.Unmarshal(raw, out)
}

// showAnswer is a whole command that shows one answer: its flags, the
// client, the GET, then --json or render over the decoded out.
func showAnswer(ctx context.Context, name string, args []string, path string, out any, render func() error) error {
	cmd := newAdminCommand(name, true)
	if err := cmd.connect(args, -1, ""); err != nil {
		return err
	}
	if printed, err := cmd.show(ctx, path, out); printed || err != nil {
		return err
	}
	return render()
}

// adminFlags registers --api, --ca-file and --token-file on fs.
type adminFlags struct {
	api, caFile, tokenFile *string
}

func addAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		api:       fs.String("api", "https://127.0.0.1:8443", "admin API URL"),
		caFile:    fs.String("ca-file", "./data/ca.pem", "cluster CA certificate to trust"),
		tokenFile: fs.String("token-file", "", "file holding the bearer token (default: $STRATUM_TOKEN)"),
	}
}

func (f adminFlags) client() (*adminClient, error) {
	token := os.Getenv("STRATUM_TOKEN")
	if *f.tokenFile != "" {
		b, err := os.ReadFile(*f.tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, errors.New("no bearer token: set STRATUM_TOKEN or --token-file (log in with POST /v1/auth/login)")
	}
	pem, err := os.ReadFile(*f.caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", *f.caFile)
	}
	return &adminClient{
		base:  strings.TrimRight(*f.api, "/"),
		token: token,
		http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}},
	}, nil
}

// do sends body (JSON-encoded when not nil) and decodes a 2xx answer into
// out; an error answer becomes the *apierr.Error it carries (Main renders
// it with its fields).
func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	// zstd's long window finds the near-identical node records of a large
	// release set; gzip's 32 KiB window does not (bench: 228x vs 12x).
	req.Header.Set("Accept-Encoding", "zstd")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "zstd" {
		zr, err := zstd.NewReader(resp.Body)
		if err != nil {
			return err
		}
		defer zr.Close()
		answer = zr
	}
	raw, err := io.ReadAll(io.LimitReader(answer, 512<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e apierr.Error
		if json.Unmarshal(raw, &e) == nil && e.Code != "" {
			return &e
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if r, ok := out.(*json.RawMessage); ok {
		*r = append((*r)[:0], raw...)
		return nil
	}
	return json.Unmarshal(raw, out)
}

// rawJSON prints an API answer as indented JSON.
func rawJSON(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return printJSON(v)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
