package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"stratum/founder"
)

func init() { Register(newTakeOverCmd) }

// newTakeOverCmd is `stratum takeover`: the operator says a restored
// founder, started isolated, is the cluster now. A command rather than a
// serve flag: the take-over happens once, and a flag would stay in a
// unit file and take the next drill's copy over unasked. It runs in the
// running founder (its control socket), so it needs no restart and no
// data key on the command line, and every replica of a shared store
// follows.
func newTakeOverCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "takeover [--data DIR]",
		Short: "end a restored founder's isolation for good: it probes the nodes, acts on OpenBao and answers nodes and joiners (audited)",
		Long: `A founder restored by stratum restore starts isolated: it serves the console and
the admin API to operators but probes no node, contacts no OpenBao and
answers no node or joiner, so a restore drill cannot reach the live
cluster. When this founder is to be the cluster (the old founder is gone
for good), run stratum takeover on its host while it serves. It is
audited (cluster.taken-over) and cannot be undone; a founder that was
never restored, or was already taken over, refuses (exit 6).
See docs/restore-drill.md.`,
		Args: cobra.NoArgs,
	}
	data := cmd.Flags().String("data", "./data", "data directory of the running, restored founder")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		msg, err := takeOverViaSocket(founder.DataDir(*data))
		if err != nil {
			return err
		}
		_, err = io.WriteString(cmd.OutOrStdout(), msg)
		return err
	}
	return cmd
}

// takeOverViaSocket asks the founder serving d to take the cluster over.
func takeOverViaSocket(d founder.DataDir) (string, error) {
	resp, err := controlClient(d.ControlSocket(), time.Minute).Post("http://founder/takeover", "text/plain", nil)
	if err != nil {
		return "", fmt.Errorf("no founder answers on %s: start the restored founder (stratum serve --data %s; it starts isolated), then run this again: %v",
			d.ControlSocket(), d, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	switch resp.StatusCode {
	case http.StatusOK:
		return string(b), nil
	case http.StatusConflict:
		return "", &ExitError{Code: ExitConflict, Err: errors.New(strings.TrimSpace(string(b)))}
	}
	return "", errors.New(strings.TrimSpace(string(b)))
}
