package releaseset

import (
	"stratum/wire"
	"strconv"
)

// The drift findings are listed node by node, in member order; for each
// node report first, then host (hostBinaries, then the staged deployment),
// then pin (pins, then unpinned images, each in record order). A node that
// did not report recently gets only its report finding: its last record
// says what it ran then, not what it runs now, so it is shown in nodes[]
// but not judged (summarize).

// appendHostDrift: host binaries that are not the build the node should
// run, and an OS deployment staged for the next boot.
func appendHostDrift(out []wire.Drift, id string, r *wire.Record) []wire.Drift {
	if h := r.HostBinaries; h != nil && h.Stale {
		out = append(out, wire.Drift{NodeID: id, Kind: wire.DriftHost, Field: "hostBinaries",
			Source: h.Source, Commit: h.Commit, Want: h.Want})
	}
	if r.Bootc != nil && r.Bootc.Staged != nil {
		s := r.Bootc.Staged
		out = append(out, wire.Drift{NodeID: id, Kind: wire.DriftHost, Field: "bootc.staged",
			Image: s.Image, Digest: s.Digest, Version: s.Version})
	}
	return out
}

// appendPinDrift: a pinned image that runs something else, and an image no
// pin names that runs containers. Pins in state current, absent (the role
// does not run it) and self (compared between nodes as controlPlane) are
// not drift.
func appendPinDrift(out []wire.Drift, id string, r *wire.Record) []wire.Drift {
	for i, p := range r.Pins {
		if p.State == wire.PinDiffers {
			out = append(out, wire.Drift{NodeID: id, Kind: wire.DriftPin, Field: "pins[" + strconv.Itoa(i) + "]",
				Name: p.Name, Pinned: p.Pinned, Running: p.Running, Containers: ptr(p.Containers)})
		}
	}
	for i, u := range r.Unpinned {
		if u.Containers > 0 {
			out = append(out, wire.Drift{NodeID: id, Kind: wire.DriftPin, Field: "unpinned[" + strconv.Itoa(i) + "]",
				Image: u.Image, Containers: ptr(u.Containers)})
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
