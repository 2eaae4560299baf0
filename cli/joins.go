package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"stratum/wire"

	"github.com/spf13/cobra"
)

func init() {
	Register(newJoinsCmd)
	Register(newMembersCmd)
}

func newJoinsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "joins", Short: "join registrations: list | get | approve | reject | cancel"}
	cmd.AddCommand(newJoinsListCmd(), newJoinsGetCmd(), newJoinsApproveCmd(),
		newJoinsEndCmd("reject", "reject a registration that has not had its turn: pending, needs-upgrade or approved (the joiner exits 3)"),
		newJoinsEndCmd("cancel", "cancel a join whose delivery is under way: delivering or installing (its member is removed)"))
	return cmd
}

func registrationPath(id string) string {
	return "/v1/admin/join/registrations/" + url.PathEscape(id)
}

func newJoinsListCmd() *cobra.Command {
	var state string
	var list struct {
		Registrations []wire.OperatorView `json:"registrations"`
	}
	cmd := showCommand("list", "list join registrations", cobra.NoArgs, func([]string) string {
		p := "/v1/admin/join/registrations"
		if state != "" {
			p += "?state=" + url.QueryEscape(state)
		}
		return p
	}, &list, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOIN\tSTATE\tROLE\tHOSTNAME\tMGMT IP\tRELEASE\tQUEUE\tKEY")
		for _, r := range list.Registrations {
			state := r.State
			if len(r.WaitingFor) > 0 {
				state += " (waiting for " + waitingFor(r) + ")"
			}
			if r.State == wire.StatePending && r.AutoApproval != "" {
				state += " (" + r.AutoApproval + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.JoinID, state, r.Role, r.Hostname, mgmtAddress(r), r.Release, r.QueuePosition, r.KeyFingerprint)
		}
		return tw.Flush()
	})
	cmd.Flags().StringVar(&state, "state", "", "only registrations in this state")
	return cmd
}

func newJoinsGetCmd() *cobra.Command {
	var r wire.OperatorView
	return showCommand("get JOIN_ID", "show one registration", cobra.ExactArgs(1), func(args []string) string {
		return registrationPath(args[0])
	}, &r, func(w io.Writer) error { return writeRegistration(w, r) })
}

// writeRegistration is a registration for a person: one field a line.
func writeRegistration(w io.Writer, r wire.OperatorView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("join", r.JoinID)
	row("state", r.State)
	row("reason", r.Reason)
	row("role", r.Role)
	row("hostname", r.Hostname)
	row("mgmt IP", r.MgmtIP)
	row("release", r.Release)
	row("key", r.KeyFingerprint)
	if r.QueuePosition > 0 {
		row("queue", fmt.Sprint(r.QueuePosition))
	}
	if a := r.Assignment; a != nil {
		row("node", a.NodeID)
		row("assigned mgmt IP", a.MgmtIP)
		row("az", a.AZ)
	}
	if len(r.WaitingFor) > 0 {
		row("waiting for", fmt.Sprintf("%s to apply generation %d", waitingFor(r), r.Generation))
	}
	row("approved by", r.ApprovedBy)
	row("inventory", r.AutoApproval)
	row("created", r.CreatedAt.Format(time.RFC3339))
	row("updated", r.UpdatedAt.Format(time.RFC3339))
	return tw.Flush()
}

// mgmtAddress is the address the node gets: the assigned one once
// approved, else the one it reported.
func mgmtAddress(r wire.OperatorView) string {
	if r.Assignment != nil && r.Assignment.MgmtIP != "" {
		return r.Assignment.MgmtIP
	}
	return r.MgmtIP
}

// waitingFor names the members a join in installing waits for, with the
// generation each has applied: "n-abc12def (has 3)".
func waitingFor(r wire.OperatorView) string {
	names := make([]string, 0, len(r.WaitingFor))
	for _, m := range r.WaitingFor {
		names = append(names, fmt.Sprintf("%s (has %d)", m.NodeID, m.AppliedGeneration))
	}
	return strings.Join(names, ", ")
}

// kvFlag collects repeated key=value flags.
type kvFlag map[string]string

func (k kvFlag) String() string { return "" }
func (k kvFlag) Type() string   { return "key=value" }
func (k kvFlag) Set(s string) error {
	key, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q: want key=value", s)
	}
	k[key] = v
	return nil
}

func newJoinsApproveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "approve JOIN_ID",
		Short:   "approve a registration: assign its node id, address, networks and labels",
		Example: "  stratum joins approve j-1a2b3c4d --mgmt-ip 10.0.0.12 --network storage=10.9.0.12@vlan90 --label topology.rack=r2",
		Args:    cobra.ExactArgs(1),
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	var a wire.Assignment
	nets, labels := kvFlag{}, kvFlag{}
	cmd.Flags().StringVar(&a.NodeID, "node-id", "", "node id (generated when empty)")
	cmd.Flags().StringVar(&a.AZ, "az", "", "availability zone")
	cmd.Flags().StringVar(&a.MgmtIP, "mgmt-ip", "", "management IP (default: the registration's)")
	cmd.Flags().Var(nets, "network", "class=IP[@interface], repeatable (e.g. storage=10.9.0.12@vlan90)")
	cmd.Flags().Var(labels, "label", "key=value, repeatable (e.g. topology.rack=r2)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		if len(nets) > 0 {
			a.Networks = map[string]wire.Network{}
			for class, v := range nets {
				ip, iface, _ := strings.Cut(v, "@")
				a.Networks[class] = wire.Network{IP: ip, Interface: iface}
			}
		}
		if len(labels) > 0 {
			a.Labels = labels
		}
		var raw json.RawMessage
		if err := c.do(cmd.Context(), "POST", registrationPath(args[0])+"/approve", a, &raw); err != nil {
			return err
		}
		var r wire.OperatorView
		return o.render(cmd.OutOrStdout(), raw, &r, func() error {
			node, ip := "", r.MgmtIP
			if r.Assignment != nil {
				node = r.Assignment.NodeID
				if r.Assignment.MgmtIP != "" {
					ip = r.Assignment.MgmtIP
				}
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "approved %s as node %s (%s, %s); state %s\n", r.JoinID, node, r.Hostname, ip, r.State)
			return err
		})
	}
	return cmd
}

// newJoinsEndCmd is reject or cancel: a reason, then the registration.
func newJoinsEndCmd(verb, short string) *cobra.Command {
	cmd := &cobra.Command{Use: verb + " JOIN_ID", Short: short, Args: cobra.ExactArgs(1)}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	reasonHelp := "why (the joiner shows it)"
	if verb == "reject" {
		reasonHelp = "why (required; the joiner shows it)"
	}
	reason := cmd.Flags().String("reason", "", reasonHelp)
	if verb == "reject" {
		_ = cmd.MarkFlagRequired("reason") // SPEC 17: rejecting needs a reason
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := c.do(cmd.Context(), "POST", registrationPath(args[0])+"/"+verb, map[string]string{"reason": *reason}, &raw); err != nil {
			return err
		}
		var r wire.OperatorView
		return o.render(cmd.OutOrStdout(), raw, &r, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (%s)\n", r.JoinID, r.State, r.Reason)
			return err
		})
	}
	return cmd
}

func newMembersCmd() *cobra.Command {
	var out wire.MembersView
	cmd := showCommand("members", "list the cluster's members (members remove NODE_ID takes a dead one out)", cobra.NoArgs, fixed("/v1/admin/cluster/members"), &out, func(w io.Writer) error {
		fmt.Fprintf(w, "generation %d\n", out.Generation)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tHOSTNAME\tROLE\tSTATE\tGEN\tAPPLIED\tMGMT IP\tAZ\tBOOT\tLAST BOOT")
		for _, m := range out.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", m.NodeID, cmp.Or(m.Hostname, "-"), m.Role, m.State, m.Generation, m.AppliedGeneration, m.MgmtIP, m.AZ, bootColumn(m), lastBootColumn(m))
		}
		return tw.Flush()
	})
	cmd.AddCommand(newMembersRemoveCmd(), newMembersReplaceCmd())
	return cmd
}

func newMembersRemoveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "remove a member for good (its machine is gone): a join it holds completes",
		Long: `Remove a member for good, for a node whose machine is gone and never runs its
agent again: every later join waits in installing until each member applies
its generation, so a dead member holds them all ("waiting for NODE_ID to
apply generation N").

In one step the founder deletes the member and bumps the generation, and the
member's transport certificate stops counting (the node gets 401 on every node
endpoint), its OpenBao node token is revoked, its release record leaves the
release set, its node id and addresses are free for a new node, and the
removal is audited (cluster.member.removed) with who removed it and why.
A join that waited only for it completes.

The founder cannot remove itself. A member whose join is still delivering or
installing is not removed: cancel that join (stratum joins cancel JOIN_ID).
A node removed by mistake joins again with a new join token.`,
		Example: "  stratum members remove n-abc12def --reason 'disk controller dead, chassis returned'",
		Args:    cobra.ExactArgs(1),
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	reason := cmd.Flags().String("reason", "", "why (required; kept in the audit log)")
	_ = cmd.MarkFlagRequired("reason")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := c.do(cmd.Context(), "POST", "/v1/admin/cluster/members/"+url.PathEscape(args[0])+"/remove", map[string]string{"reason": *reason}, &raw); err != nil {
			return err
		}
		var m wire.MemberView
		return o.render(cmd.OutOrStdout(), raw, &m, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "removed %s (%s, %s, was %s)\n", m.NodeID, m.Hostname, m.MgmtIP, m.State)
			return err
		})
	}
	return cmd
}

// bootColumn is the prober's view of a member: "ready", "starting
// (phase 1.2s)", "unreachable", or "-" when it was not probed (yet).
func bootColumn(m wire.MemberView) string {
	switch m.BootState {
	case "":
		return "-"
	case "starting":
		return fmt.Sprintf("starting (%s %s)", m.BootPhase, time.Duration(m.BootPhaseMs)*time.Millisecond)
	}
	return m.BootState
}

func lastBootColumn(m wire.MemberView) string {
	if m.LastBootMs > 0 {
		return (time.Duration(m.LastBootMs) * time.Millisecond).String()
	}
	return "-"
}

func newMembersReplaceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replace NODE_ID --join JOIN_ID --reason R",
		Short: "replace a member by the machine of a pending registration (new hardware, or the machine reinstalled)",
		Long: `Replace a member by the machine of a pending registration: new hardware in its
place, or the same machine reinstalled with a new key.

In one step the founder removes the member as members remove does (its
transport certificate stops counting: the old machine gets 401 on every node
endpoint; its OpenBao node token is revoked, its release record forgotten)
and approves the registration with what the member had: its node id,
management address, networks, labels and az. Audited cluster.member.replaced
with the old and new key fingerprints and the reason.

Refused, changing nothing: the founder, a member whose join is still
delivering or installing, a registration that is not pending or whose join
token is for another role. A machine of the inventory reinstalled with the
same TPM is replaced without this command.`,
		Example: "  stratum members replace n-abc12def --join j-1a2b3c4d --reason 'mainboard swapped'",
		Args:    cobra.ExactArgs(1),
	}
	admin := addAdminFlags(cmd)
	o := addOutput(cmd)
	joinID := cmd.Flags().String("join", "", "the pending registration of the machine that takes its place (required)")
	reason := cmd.Flags().String("reason", "", "why (required; kept in the audit log)")
	_ = cmd.MarkFlagRequired("join")
	_ = cmd.MarkFlagRequired("reason")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := admin.client()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		body := map[string]string{"joinId": *joinID, "reason": *reason}
		if err := c.do(cmd.Context(), "POST", "/v1/admin/cluster/members/"+url.PathEscape(args[0])+"/replace", body, &raw); err != nil {
			return err
		}
		var r wire.OperatorView
		return o.render(cmd.OutOrStdout(), raw, &r, func() error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "replaced %s by %s (%s, %s); state %s\n", args[0], r.JoinID, r.Hostname, mgmtAddress(r), r.State)
			return err
		})
	}
	return cmd
}
