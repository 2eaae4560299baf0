// Package hostrecord builds a node's release record (the seed's release
// object, wire.Record) from the real host: one collector per field,
// each bounded by a timeout. A tool that is missing, or whose output
// cannot be read, leaves its field at the seed's "not read" value (absent,
// or null where the seed says null) and reports a Problem: nothing is
// ever guessed.
//
// The agent (SPEC 11) runs every collector; the founder's own record uses
// the same collectors for what it shares with a node (os-release, kernel,
// image mode, extensions).
package hostrecord

import (
	"context"
	"time"

	"stratum/buildinfo"
	"stratum/wire"
)

// DefaultTimeout bounds each collector: a hung bootc or container runtime
// must not stop the record.
const DefaultTimeout = 10 * time.Second

// Host says where the facts come from.
type Host struct {
	// Root is the node's file system root ("/" on a node; a directory in
	// tests). Files are read under it; commands run on the real host.
	Root string
	// OSFallback is the root whose os-release is read when Root has none
	// ("/" for the agent); empty: none.
	OSFallback string
	// Packages are the host packages to report (--packages).
	Packages []PackageSpec
	// PinsFile is the control plane's image pins (--pins-file); empty
	// when the node has none.
	PinsFile string
	// PayloadDir is where release payloads are kept (--payload-dir);
	// empty means not configured: stored stays null.
	PayloadDir string
	// Build is this binary's build; Executable its path (for the
	// hostBinaries source).
	Build      buildinfo.Info
	Executable string
	// Run runs the host's tools; nil means ExecRunner.
	Run     Runner
	Timeout time.Duration
	// Now stamps hostReportedAt; nil means time.Now.
	Now func() time.Time
}

// Problem is a field that could not be read, and why.
type Problem struct {
	Field string
	Err   string
}

// collector fills its fields of rec, or returns why it could not.
type collector struct {
	field string
	fill  func(ctx context.Context, h *Host, rec *wire.Record) error
}

// collectors run in this order: hostBinaries reads what controlPlane and
// imageMode found.
var collectors = []collector{
	{"os", collectOS},
	{"bootc", collectBootc},
	{"extensions", collectExtensions},
	{"packages", collectPackages},
	{"pins", collectPins},
	{"stored", collectStored},
	{"controlPlane", collectControlPlane},
	{"hostBinaries", collectHostBinaries},
}

// Collect builds the record. Problems name each field left unread.
func Collect(ctx context.Context, h Host) (wire.Record, []Problem) {
	if h.Run == nil {
		h.Run = ExecRunner{}
	}
	if h.Timeout <= 0 {
		h.Timeout = DefaultTimeout
	}
	if h.Root == "" {
		h.Root = "/"
	}
	var rec wire.Record
	var problems []Problem
	for _, c := range collectors {
		cctx, cancel := context.WithTimeout(ctx, h.Timeout)
		err := c.fill(cctx, &h, &rec)
		cancel()
		if err != nil {
			problems = append(problems, Problem{Field: c.field, Err: err.Error()})
		}
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	at := now().UTC()
	rec.HostReportedAt = &at
	return rec, problems
}
