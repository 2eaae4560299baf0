package cli

import (
	"context"
	"encoding/json"
	"os"

	"stratum/releaseset"
)

func init() {
	Register(Command{Name: "release-set", Summary: "every node's release, skew and drift", Run: runReleaseSet})
}

func runReleaseSet(ctx context.Context, args []string) error {
	fs := newFlagSet("release-set")
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
	if err := c.do(ctx, "GET", "/v1/admin/upgrades/release", nil, &raw); err != nil {
		return err
	}
	if *jsonOut {
		return rawJSON(raw)
	}
	var set releaseset.Set
	if err := json.Unmarshal(raw, &set); err != nil {
		return err
	}
	return releaseset.WriteTable(os.Stdout, set)
}
