package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"stratum/apiclient"

	"github.com/klauspost/compress/zstd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// adminFlags are the flags every operator command shares: --api,
// --ca-file, --token-file.
type adminFlags struct {
	api, caFile, tokenFile string
	caFlag                 *pflag.Flag // --ca-file: given (or its twin set), or the default
}

const defaultAPI = "https://127.0.0.1:8443"

func addAdminFlags(cmd *cobra.Command) *adminFlags {
	f := &adminFlags{}
	cmd.Flags().StringVar(&f.api, "api", defaultAPI, "admin API URL")
	cmd.Flags().StringVar(&f.caFile, "ca-file", "./data/ca.pem", "cluster CA certificate to trust (default: the one stratum login was given for --api, else ./data/ca.pem)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token (default: $STRATUM_TOKEN, else the session of stratum login for --api)")
	f.caFlag = cmd.Flags().Lookup("ca-file")
	return f
}

// adminClient is the thin client the operator commands share.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

// client builds the client: the bearer token from STRATUM_TOKEN, else
// --token-file, else the credentials file's session for --api.
func (f *adminFlags) client() (*adminClient, error) {
	c, err := f.anonymous()
	if err != nil {
		return nil, err
	}
	token := os.Getenv("STRATUM_TOKEN")
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		s, err := loadCredentials()
		if err != nil {
			return nil, err
		}
		token = s.Sessions[c.base].Token
	}
	if token == "" {
		return nil, &ExitError{Code: ExitAuth, Err: fmt.Errorf("not logged in to %s: run `stratum login --api %s` (or set STRATUM_TOKEN or --token-file)", c.base, c.base)}
	}
	c.token = token
	return c, nil
}

// anonymous is the client without a bearer token (login).
func (f *adminFlags) anonymous() (*adminClient, error) {
	f.rememberedCA()
	pem, err := os.ReadFile(f.caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", f.caFile)
	}
	return &adminClient{
		base: apiKey(f.api),
		http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}},
	}, nil
}

// rememberedCA makes the CA file stratum login was given for this API
// (kept as an absolute path) the one to trust when --ca-file (or its
// twin) is not given: the default ./data/ca.pem names a file only in
// the directory the founder was started from. A credentials file that
// cannot be read leaves the default: the session's own use reports why.
func (f *adminFlags) rememberedCA() {
	if f.caFlag == nil || f.caFlag.Changed {
		return
	}
	if creds, err := loadCredentials(); err == nil && creds.Sessions[apiKey(f.api)].CAFile != "" {
		f.caFile = creds.Sessions[apiKey(f.api)].CAFile
	}
}

// apiKey is the API URL as the credentials file keys it.
func apiKey(api string) string { return strings.TrimRight(api, "/") }

// api is the one founder client (package apiclient) over c: zstd asked
// for, because zstd's long window finds the near-identical node records of
// a large release set where gzip's 32 KiB window does not (bench: 228x vs
// 12x).
func (c *adminClient) api() *apiclient.Client {
	return apiclient.New([]string{c.base}, c.http, apiclient.Options{
		Token:     c.token,
		MaxAnswer: maxAnswer,
		Encoding:  "zstd",
		Decode: func(r io.Reader) (io.ReadCloser, error) {
			zr, err := zstd.NewReader(r)
			if err != nil {
				return nil, err
			}
			return zr.IOReadCloser(), nil
		},
	})
}

// maxAnswer bounds an answer the CLI reads (a whole release set).
const maxAnswer = 512 << 20

// do sends body (JSON-encoded when not nil) and decodes a 2xx answer into
// out (a *json.RawMessage keeps it as it came); an error answer becomes
// the *apierr.Error it carries.
func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	a, err := c.api().Exchange(ctx, method, path, body)
	return answered(a, c.unreached(err), method, path, out)
}

// unreached says, for a connection refused, that no founder listens at
// the address the command used and where that address comes from: a
// stopped founder, or a mistyped --api, reads as more than "dial tcp ...:
// connect: connection refused".
func (c *adminClient) unreached(err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("no founder answers at %s: is it running? (--api or STRATUM_API names it): %w", c.base, err)
	}
	return err
}

// send sends a request built against c.base (a streamed upload) with the
// token, and decodes the answer as do describes.
func (c *adminClient) send(req *http.Request, out any) error {
	a, err := c.api().Send(req)
	return answered(a, c.unreached(err), req.Method, req.URL.Path, out)
}

// answered is do's reading of an answer: an envelope becomes its
// *apierr.Error (Main renders it with its fields), any other failure a
// statusError.
func answered(a *apiclient.Answer, err error, method, path string, out any) error {
	if err != nil {
		return err
	}
	if a.Status >= 300 {
		if re := a.Err(); !re.NotEnvelope {
			return re.Err
		}
		return &statusError{method: method, path: path, status: a.Status}
	}
	if out == nil || len(a.Body) == 0 {
		return nil
	}
	if r, ok := out.(*json.RawMessage); ok {
		*r = append((*r)[:0], a.Body...)
		return nil
	}
	return json.Unmarshal(a.Body, out)
}

// get is GET path kept as it came (for -o json/yaml).
func (c *adminClient) get(ctx context.Context, path string) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.do(ctx, "GET", path, nil, &raw)
	return raw, err
}

// showCommand is a whole read command: admin flags and -o, one GET,
// then the answer as JSON/YAML or decoded into out for the table.
func showCommand(use, short string, args cobra.PositionalArgs, path func(args []string) string, out any, table func(w io.Writer) error) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: args}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		raw, err := c.get(cmd.Context(), path(args))
		if err != nil {
			return err
		}
		return o.render(cmd.OutOrStdout(), raw, out, func() error { return table(cmd.OutOrStdout()) })
	}
	return cmd
}

// fixed is a path that takes no argument.
func fixed(p string) func([]string) string { return func([]string) string { return p } }
