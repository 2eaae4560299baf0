// Package buildinfo is the build's identity: the version and commit the
// Makefile links in. The founder shows it on /version and in its own
// release record; an agent reports it for its node.
package buildinfo

import "runtime/debug"

// Set at link time by the Makefile (-X stratum/buildinfo.version=...).
var (
	version = "dev"
	commit  = "unknown"
)

// Info names one build.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// Current is the running binary's build. Without -ldflags the commit is
// the Go toolchain's record of the checkout (vcs.revision), so a plain
// `go build` of a clean checkout names its commit; a checkout with
// uncommitted changes is no commit's build and stays "unknown".
func Current() Info {
	c := commit
	if c == "unknown" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			c = fromSettings(bi.Settings)
		}
	}
	return Info{Version: version, Commit: c}
}

// fromSettings is vcs.revision of a clean checkout, else "unknown".
func fromSettings(settings []debug.BuildSetting) string {
	rev, modified := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" || modified {
		return "unknown"
	}
	return rev
}
