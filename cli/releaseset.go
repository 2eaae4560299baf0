package cli

import (
	"context"
	"os"

	"stratum/releaseset"
)

func init() {
	Register(Command{Name: "release-set", Summary: "every node's release, skew and drift", Run: runReleaseSet})
}

func runReleaseSet(ctx context.Context, args []string) error {
	var set releaseset.Set
	return showAnswer(ctx, "release-set", args, "/v1/admin/upgrades/release", &set, func() error {
		return releaseset.WriteTable(os.Stdout, set)
	})
}
