package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"stratum/join"
	"stratum/wire"

	"github.com/spf13/cobra"
)

func init() { Register(newInventoryCmd) }

// maxInventoryFile bounds what apply reads, as the API bounds the body.
const maxInventoryFile = 8 << 20

func newInventoryCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "inventory", Short: "the inventory of expected machines (zero-touch enrollment): apply | list"}
	cmd.AddCommand(newInventoryApplyCmd(), newInventoryListCmd())
	return cmd
}

func newInventoryApplyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "replace the inventory with a YAML or JSON document (- reads stdin)",
		Long: `Replace the inventory of expected machines with FILE, whole. Each entry names
how its machine is recognised, by exactly one of
  match.ekSha256        SHA-256 (hex) of its TPM's EK public key
  match.ekCertSha256    SHA-256 (hex) of its TPM's EK certificate
  match.keyFingerprint  its registration key, sha256:HEX as joins list shows
                        it (the weaker match: whoever holds the key matches)
and its full assignment: nodeId, role, mgmtIp, and optionally hostname, az,
networks and labels. A registration an entry recognises is approved with
that assignment without a person, one join at a time as always; one that
matches nothing waits for a person, with the reason in joins get.

Every problem is named by its field (machines[3].mgmtIp), an address or node
id a member or an approved join already holds included; a refused document
changes nothing.`,
		Example: `  stratum inventory apply -f rack1.yaml

  # rack1.yaml
  machines:
    - match: {ekSha256: 3f1c...}
      nodeId: n-rack0101
      role: worker
      mgmtIp: 10.0.1.11
      az: az1
      networks: {storage: {ip: 10.9.1.11, interface: vlan90}}
      labels: {topology.rack: r1}`,
		Args: cobra.NoArgs,
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	file := cmd.Flags().StringP("file", "f", "", "the inventory document, YAML or JSON (- for stdin)")
	_ = cmd.MarkFlagRequired("file")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		data, err := readInventoryFile(cmd, *file)
		if err != nil {
			return err
		}
		_, body, err := join.DecodeInventoryDocument(data)
		if err != nil {
			return err
		}
		c, err := admin.client()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := c.do(cmd.Context(), "PUT", "/v1/admin/inventory", json.RawMessage(body), &raw); err != nil {
			return err
		}
		var v wire.InventoryView
		return o.render(cmd.OutOrStdout(), raw, &v, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "inventory applied: %s\n", plural(len(v.Machines), "machine", "machines"))
			return err
		})
	}
	return cmd
}

func readInventoryFile(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInventoryFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInventoryFile {
		return nil, fmt.Errorf("%s: larger than %d MiB", name, maxInventoryFile>>20)
	}
	return data, nil
}

func newInventoryListCmd() *cobra.Command {
	var v wire.InventoryView
	return showCommand("list", "list the expected machines and what became of each (expected, joining, member)", cobra.NoArgs, fixed("/v1/admin/inventory"), &v, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tROLE\tMGMT IP\tAZ\tMATCH\tSTATE\tJOIN")
		for _, m := range v.Machines {
			join := m.JoinID
			if join == "" {
				join = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.NodeID, m.Role, m.MgmtIP, orDash(m.AZ), matchColumn(m.Match), m.State, join)
		}
		return tw.Flush()
	})
}

// matchColumn is an entry's match, shortened: "ek 3f1c2a9b…".
func matchColumn(m wire.InventoryMatch) string {
	short := func(kind, h string) string {
		if len(h) > 16 {
			h = h[:16] + "…"
		}
		return kind + " " + h
	}
	switch {
	case m.EKSHA256 != "":
		return short("ek", m.EKSHA256)
	case m.EKCertSHA256 != "":
		return short("ek-cert", m.EKCertSHA256)
	default:
		return short("key", m.KeyFingerprint)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
