package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
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
	fs := newFlagSet("joins " + sub)
	af := addAdminFlags(fs)
	state := fs.String("state", "", "list: only registrations in this state")
	nodeID := fs.String("node-id", "", "approve: node id (generated when empty)")
	az := fs.String("az", "", "approve: availability zone")
	mgmt := fs.String("mgmt-ip", "", "approve: management IP (default: the registration's)")
	reason := fs.String("reason", "", "reject/cancel: why")
	nets := kvFlag{}
	labels := kvFlag{}
	fs.Var(nets, "network", "approve: class=IP[@interface], repeatable (e.g. storage=10.9.0.12@vlan90)")
	fs.Var(labels, "label", "approve: key=value, repeatable (e.g. topology.rack=r2)")
	jsonOut := fs.Bool("json", false, "print the raw JSON")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	switch sub {
	case "list":
		path := "/v1/admin/join/registrations"
		if *state != "" {
			path += "?state=" + url.QueryEscape(*state)
		}
		if err := c.do(ctx, "GET", path, nil, &raw); err != nil {
			return err
		}
		if *jsonOut {
			return rawJSON(raw)
		}
		var out struct {
			Registrations []map[string]any `json:"registrations"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOIN\tSTATE\tROLE\tHOSTNAME\tMGMT IP\tRELEASE\tQUEUE\tKEY")
		for _, r := range out.Registrations {
			fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%v\t%v\n", r["joinId"], r["state"], r["role"], r["hostname"], r["mgmtIp"], r["release"], r["queuePosition"], r["keyFingerprint"])
		}
		return tw.Flush()
	case "get", "approve", "reject", "cancel":
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: stratum joins %s JOIN_ID", sub)
		}
		base := "/v1/admin/join/registrations/" + url.PathEscape(fs.Arg(0))
		switch sub {
		case "get":
			err = c.do(ctx, "GET", base, nil, &raw)
		case "approve":
			body := map[string]any{}
			if *nodeID != "" {
				body["nodeId"] = *nodeID
			}
			if *az != "" {
				body["az"] = *az
			}
			if *mgmt != "" {
				body["mgmtIp"] = *mgmt
			}
			if len(nets) > 0 {
				n := map[string]any{}
				for class, v := range nets {
					ip, iface, _ := strings.Cut(v, "@")
					n[class] = map[string]string{"ip": ip, "interface": iface}
				}
				body["networks"] = n
			}
			if len(labels) > 0 {
				body["labels"] = map[string]string(labels)
			}
			err = c.do(ctx, "POST", base+"/approve", body, &raw)
		default:
			err = c.do(ctx, "POST", base+"/"+sub, map[string]string{"reason": *reason}, &raw)
		}
		if err != nil {
			return err
		}
		return rawJSON(raw)
	}
	return fmt.Errorf("unknown joins subcommand %q", sub)
}

func runMembers(ctx context.Context, args []string) error {
	fs := newFlagSet("members")
	af := addAdminFlags(fs)
	jsonOut := fs.Bool("json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "GET", "/v1/admin/cluster/members", nil, &raw); err != nil {
		return err
	}
	if *jsonOut {
		return rawJSON(raw)
	}
	var out struct {
		Generation uint64           `json:"generation"`
		Members    []map[string]any `json:"members"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	fmt.Printf("generation %d\n", out.Generation)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tSTATE\tGEN\tAPPLIED\tMGMT IP\tAZ\tBOOT\tLAST BOOT")
	for _, m := range out.Members {
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%v\t%s\t%s\n", m["nodeId"], m["role"], m["state"], m["generation"], m["appliedGeneration"], m["mgmtIp"], m["az"], bootColumn(m), lastBootColumn(m))
	}
	return tw.Flush()
}

// bootColumn is the prober's view of a member: "ready", "starting
// (phase 1.2s)", "unreachable", or "-" when it was not probed (yet).
func bootColumn(m map[string]any) string {
	state, _ := m["bootState"].(string)
	if state == "" {
		return "-"
	}
	if state == "starting" {
		phase, _ := m["bootPhase"].(string)
		ms, _ := m["bootPhaseMs"].(float64)
		return fmt.Sprintf("starting (%s %s)", phase, time.Duration(ms)*time.Millisecond)
	}
	return state
}

func lastBootColumn(m map[string]any) string {
	if ms, ok := m["lastBootMs"].(float64); ok && ms > 0 {
		return (time.Duration(ms) * time.Millisecond).String()
	}
	return "-"
}
