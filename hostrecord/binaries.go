package hostrecord

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"stratum/buildinfo"
	"stratum/strictjson"
	"stratum/wire"
)

// ControlPlaneFile is where a node's control plane writes its build and
// schema levels (the record's controlPlane), relative to the root.
const ControlPlaneFile = "etc/stratum/control-plane.json"

// collectControlPlane reads ROOT/etc/stratum/control-plane.json when the
// node runs a control plane; absent otherwise.
func collectControlPlane(_ context.Context, h *Host, rec *wire.Record) error {
	b, err := os.ReadFile(filepath.Join(h.Root, ControlPlaneFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	cp, err := parseControlPlane(b)
	if err != nil {
		return err
	}
	rec.ControlPlane = cp
	return nil
}

func parseControlPlane(b []byte) (*wire.ControlPlane, error) {
	var cp wire.ControlPlane
	if err := strictjson.Decode(b, &cp); err != nil {
		return nil, fmt.Errorf("%s: %v", ControlPlaneFile, err)
	}
	if cp.Commit == "" || (!IsCommit(cp.Commit) && cp.Commit != wire.CommitUnknown) {
		return nil, fmt.Errorf("%s: commit %q is not a commit", ControlPlaneFile, cp.Commit)
	}
	for _, l := range []*int{cp.SchemaLevel, cp.CompatSchemaLevel, cp.DatabaseSchemaLevel} {
		if l != nil && *l < 0 {
			return nil, fmt.Errorf("%s: a schema level is negative", ControlPlaneFile)
		}
	}
	return &cp, nil
}

// IsCommit: 4 to 64 lowercase hex digits, as the release set checks.
func IsCommit(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// HostBinaries describes this binary. want is the build the node should
// run: on a mutable node its control plane's build (wantCommit); on an
// image-mode node the OS image decides, which the agent does not know, so
// want stays empty there.
func HostBinaries(b buildinfo.Info, executable string, imageMode bool, wantCommit string) *wire.HostBinaries {
	hb := &wire.HostBinaries{Source: sourceOf(executable, imageMode), Commit: b.Commit}
	if !IsCommit(hb.Commit) {
		hb.Commit = wire.CommitUnknown
	}
	if !imageMode && IsCommit(wantCommit) {
		hb.Want = wantCommit
	}
	hb.Stale = hb.Commit == wire.CommitUnknown || (hb.Want != "" && hb.Want != hb.Commit)
	return hb
}

// sourceOf: binaries under /var were switched in live from a release
// (overlay); under /usr on an image-mode node they came with the OS
// image; anything else was installed from the control plane's image.
func sourceOf(executable string, imageMode bool) wire.HostSource {
	switch {
	case strings.HasPrefix(executable, "/var/"):
		return wire.SourceOverlay
	case imageMode && strings.HasPrefix(executable, "/usr/"):
		return wire.SourceOSImage
	}
	return wire.SourceControlPlaneImage
}

func collectHostBinaries(_ context.Context, h *Host, rec *wire.Record) error {
	want := ""
	if rec.ControlPlane != nil {
		want = rec.ControlPlane.Commit
	}
	rec.HostBinaries = HostBinaries(h.Build, h.Executable, rec.ImageMode, want)
	return nil
}
