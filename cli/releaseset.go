package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"stratum/releaseset"
	"stratum/wire"
)

func init() { Register(newReleaseSetCmd) }

// releaseSetPage is how many nodes one page request asks for.
const releaseSetPage = 500

// newReleaseSetCmd asks for the summary (?view=summary), then pages
// through nodes[] (?limit&after) for the first --nodes nodes (all with
// --all): a large cluster's whole set is over a gigabyte.
func newReleaseSetCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "release-set", Short: "every node's release, skew and drift", Args: cobra.NoArgs}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	limit := cmd.Flags().Int("nodes", 50, "show the first N nodes (the summary covers every node)")
	all := cmd.Flags().Bool("all", false, "show every node (pages through all of them)")
	check := cmd.Flags().Bool("check", false, "exit 0 when the set is consistent and no node is behind the admission release, 1 otherwise (the summary covers every node)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		const path = "/v1/admin/upgrades/release"
		raw, err := c.get(cmd.Context(), path+"?view=summary")
		if err != nil {
			return err
		}
		var head struct {
			wire.ReleaseSet
			Members int `json:"members"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return fmt.Errorf("release set summary: %w", err)
		}
		set := head.ReleaseSet
		set.Nodes = []wire.SetNode{}
		want := *limit
		if *all {
			want = head.Members
		}
		for after := ""; len(set.Nodes) < want; {
			q := url.Values{"limit": {strconv.Itoa(min(releaseSetPage, want-len(set.Nodes)))}}
			if after != "" {
				q.Set("after", after)
			}
			raw, err := c.get(cmd.Context(), path+"?"+q.Encode())
			if err != nil {
				return err
			}
			var page struct {
				Nodes []wire.SetNode `json:"nodes"`
				Next  string         `json:"next"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				return fmt.Errorf("release set page: %w", err)
			}
			set.Nodes = append(set.Nodes, page.Nodes...)
			if page.Next == "" || len(page.Nodes) == 0 {
				break
			}
			after = page.Next
		}
		out, err := json.Marshal(set)
		if err != nil {
			return err
		}
		err = o.render(cmd.OutOrStdout(), out, &set, func() error {
			if _, err := fmt.Fprintln(cmd.OutOrStdout(), releaseset.HeadLine(set, head.Members)); err != nil {
				return err
			}
			if err := releaseset.WriteTable(cmd.OutOrStdout(), set, head.Members); err != nil {
				return err
			}
			if len(set.Nodes) < head.Members {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "showing %d of %d nodes (the summary covers all of them; --nodes N or --all for more)\n", len(set.Nodes), head.Members)
				return err
			}
			return nil
		})
		if err == nil && *check && !releaseset.Healthy(set) {
			return &ExitError{Code: ExitFailed, Err: errors.New(releaseset.HeadLine(set, head.Members))}
		}
		return err
	}
	return cmd
}
