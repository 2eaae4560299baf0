package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"stratum/joiner"
	"stratum/release"
)

func newReleasePushCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "push DIR",
		Short: "upload a signed release tree from this machine to the founder",
		Long: `Upload the signed release tree DIR from this machine to the founder
(POST /v1/admin/releases/upload) as a tar stream, with a progress bar on a
terminal. The founder checks the manifest's signature against its release
keys before it takes any other byte, checks every file against the
manifest, and keeps nothing unless the whole tree verifies.`,
		Example: "  stratum release push ./release-0.2.0",
		Args:    cobra.ExactArgs(1),
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	replace := cmd.Flags().Bool("replace", false, "replace an imported release of the same version whose content differs")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		dir := args[0]
		mb, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(release.ManifestPath)))
		if err != nil {
			return fmt.Errorf("%s is not a signed release tree: %w", dir, err)
		}
		m, err := release.ParseManifest(mb)
		if err != nil {
			return fmt.Errorf("%s: %w", release.ManifestPath, releaseErr(err))
		}
		total := m.TotalSize()
		progress, finish := importProgress(os.Stderr, "sending")
		pr, pw := io.Pipe()
		tarErr := make(chan error, 1)
		go func() {
			var done int64
			_, err := release.WriteTar(pw, dir, func(n int64) {
				done += n
				progress(done, total, "")
			})
			pw.CloseWithError(err)
			tarErr <- err
		}()
		path := "/v1/admin/releases/upload"
		if *replace {
			path += "?replace=true"
		}
		req, err := http.NewRequestWithContext(cmd.Context(), "POST", c.base+path, pr)
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-tar")
		// The tree may take long to send: no whole-request timeout (the
		// founder cuts a sender that stalls).
		upload := *c
		hc := *c.http
		hc.Timeout = 0
		upload.http = &hc
		start := time.Now()
		var raw json.RawMessage
		err = upload.send(req, &raw)
		pr.Close()
		finish()
		// A tree that cannot be read or no longer matches its manifest
		// stops the upload here: say that, not the request's failure
		// around it (Post "https://...": ...).
		if werr := <-tarErr; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
			return fmt.Errorf("%s not sent: %w", dir, werr)
		}
		if err != nil {
			return err
		}
		var ans importAnswer
		return o.render(cmd.OutOrStdout(), raw, &ans, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "pushed release %s: %d files, %s, verified and imported in %s\n",
				ans.Release, ans.Files, joiner.HumanBytes(total), time.Since(start).Round(time.Millisecond))
			return err
		})
	}
	return cmd
}
