package founder

import (
	"context"
	"os"

	"stratum/buildinfo"
	"stratum/hostrecord"
	"stratum/wire"
)

// hostRecord is the founder's own release as it sees its host: the
// collectors a node's agent runs for os-release, the kernel, image mode
// and extensions, plus what only the founder knows: its own build as the
// control plane with every schema level, and its host binaries, which
// should be that build (want) on a mutable host.
func (f *Founder) hostRecord(ctx context.Context) wire.Record {
	exe, _ := os.Executable()
	cp := f.releases.ControlPlane
	build := buildinfo.Info{Version: cp.Version, Commit: cp.Commit}
	rec, problems := hostrecord.Collect(ctx, hostrecord.Host{Root: "/", Packages: f.opts.Packages, Build: build, Executable: exe})
	f.recordProblems.Report(f.log, problems)
	rec.ControlPlane = &cp
	rec.HostBinaries = hostrecord.HostBinaries(build, exe, rec.ImageMode, cp.Commit)
	return rec
}
