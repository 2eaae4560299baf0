package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"stratum/cluster"
	"stratum/join"
	"strings"
	"text/tabwriter"
	"time"
)

func init() {
	Register(Command{Name: "joins", Summary: "join registrations: list | get | approve | reject | cancel", Run: runJoins})
	Register(Command{Name: "members", Summary: "list the cluster's members", Run: runMembers})
}

// kvFlag collects repeated key=value flags.
type kvFlag map[string]string

func (k kvFlag) String() string { return "" }
func (k kvFlag) Set(s string) error {
	key, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q: want key=value", s)
	}
	k[key] = v
	return nil
}

func runJoins(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: stratum joins list|get|approve|reject|cancel")
	}
	sub := args[0]
	cmd := newAdminCommand("joins "+sub, true)
	state := cmd.fs.String("state", "", "list: only registrations in this state")
	nodeID := cmd.fs.String("node-id", "", "approve: node id (generated when empty)")
	az := cmd.fs.String("az", "", "approve: availability zone")
	mgmt := cmd.fs.String("mgmt-ip", "", "approve: management IP (default: the registration's)")
	reason := cmd.fs.String("reason", "", "reject/cancel: why")
	nets := kvFlag{}
	labels := kvFlag{}
	cmd.fs.Var(nets, "network", "approve: class=IP[@interface], repeatable (e.g. storage=10.9.0.12@vlan90)")
	cmd.fs.Var(labels, "label", "approve: key=value, repeatable (e.g. topology.rack=r2)")
	if err := cmd.connect(args[1:], -1, ""); err != nil {
		return err
	}
	switch sub {
	case "list":
		path := "/v1/admin/join/registrations"
		if *state != "" {
			path += "?state=" + url.QueryEscape(*state)
		}
		var out struct {
			Registrations []join.OperatorView `json:"registrations"`
		}
		if printed, err := cmd.show(ctx, path, &out); printed || err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOIN\tSTATE\tROLE\tHOSTNAME\tMGMT IP\tRELEASE\tQUEUE\tKEY")
		for _, r := range out.Registrations {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.JoinID, r.State, r.Role, r.Hostname, r.MgmtIP, r.Release, r.QueuePosition, r.KeyFingerprint)
		}
		return tw.Flush()
	case "get", "approve", "reject", "cancel":
		if cmd.fs.NArg() != 1 {
			return fmt.Errorf("usage: stratum joins %s JOIN_ID", sub)
		}
		base := "/v1/admin/join/registrations/" + url.PathEscape(cmd.fs.Arg(0))
		var raw json.RawMessage
		var err error
		switch sub {
		case "get":
			err = cmd.do(ctx, "GET", base, nil, &raw)
		case "approve":
			a := join.Assignment{NodeID: *nodeID, AZ: *az, MgmtIP: *mgmt}
			if len(nets) > 0 {
				a.Networks = map[string]cluster.Network{}
				for class, v := range nets {
					ip, iface, _ := strings.Cut(v, "@")
					a.Networks[class] = cluster.Network{IP: ip, Interface: iface}
				}
			}
			if len(labels) > 0 {
				a.Labels = labels
			}
			err = cmd.do(ctx, "POST", base+"/approve", a, &raw)
		default:
			err = cmd.do(ctx, "POST", base+"/"+sub, map[string]string{"reason": *reason}, &raw)
		}
		if err != nil {
			return err
		}
		return rawJSON(raw)
	}
	return fmt.Errorf("unknown joins subcommand %q", sub)
}

func runMembers(ctx context.Context, args []string) error {
	var out join.MembersView
	return showAnswer(ctx, "members", args, "/v1/admin/cluster/members", &out, func() error {
		fmt.Printf("generation %d\n", out.Generation)
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tROLE\tSTATE\tGEN\tAPPLIED\tMGMT IP\tAZ\tBOOT\tLAST BOOT")
		for _, m := range out.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", m.NodeID, m.Role, m.State, m.Generation, m.AppliedGeneration, m.MgmtIP, m.AZ, bootColumn(m), lastBootColumn(m))
		}
		return tw.Flush()
	})
}

// bootColumn is the prober's view of a member: "ready", "starting
// (phase 1.2s)", "unreachable", or "-" when it was not probed (yet).
func bootColumn(m join.MemberView) string {
	switch m.BootState {
	case "":
		return "-"
	case "starting":
		return fmt.Sprintf("starting (%s %s)", m.BootPhase, time.Duration(m.BootPhaseMs)*time.Millisecond)
	}
	return m.BootState
}

func lastBootColumn(m join.MemberView) string {
	if m.LastBootMs > 0 {
		return (time.Duration(m.LastBootMs) * time.Millisecond).String()
	}
	return "-"
}
