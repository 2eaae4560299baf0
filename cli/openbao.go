package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"stratum/crypto"
	"stratum/founder"
)

func init() { Register(newOpenBaoCmd) }

// newOpenBaoCmd is `stratum openbao converge`: the running founder does
// the work (through its control socket: the root token never appears on
// a command line or in the store); this reads the token file and prints
// the answer.
func newOpenBaoCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "openbao", Short: "the cluster's OpenBao: converge replaces the founder's root token with a scoped one"}
	converge := &cobra.Command{
		Use:   "converge --root-token-file FILE [--data DIR]",
		Short: "write the stratum-cp and stratum-node policies and give the founder a periodic stratum-cp token (the root token is used once, never kept)",
		Args:  cobra.NoArgs,
	}
	data := converge.Flags().String("data", "./data", "data directory of the running founder")
	rootFile := converge.Flags().String("root-token-file", "", "file holding an OpenBao root token; used once, never stored")
	_ = converge.MarkFlagRequired("root-token-file")
	converge.RunE = func(cmd *cobra.Command, _ []string) error {
		msg, err := convergeViaSocket(cmd.Context(), founder.DataDir(*data).ControlSocket(), *rootFile)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write([]byte(msg))
		return err
	}
	cmd.AddCommand(converge)
	return cmd
}

// maxRootTokenFile bounds a root token file: a token is a few hundred
// bytes.
const maxRootTokenFile = 64 << 10

// convergeViaSocket asks the founder listening on sock to converge its
// OpenBao token with the root token in rootTokenFile.
func convergeViaSocket(ctx context.Context, sock, rootTokenFile string) (string, error) {
	root, err := crypto.ReadFileLimit(rootTokenFile, maxRootTokenFile)
	if err != nil {
		return "", fmt.Errorf("root token file: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://founder/openbao/converge", bytes.NewReader(root))
	if err != nil {
		return "", err
	}
	resp, err := controlClient(sock, 2*time.Minute).Do(req)
	if err != nil {
		return "", fmt.Errorf("no founder answers on %s (converge runs in the running founder): %v", sock, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
