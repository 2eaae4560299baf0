// Package buildinfo is the build's identity: the version and commit the
// Makefile links in. The founder shows it on /version and in its own
// release record; an agent reports it for its node.
package buildinfo

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

// Current is the running binary's build.
func Current() Info { return Info{Version: version, Commit: commit} }
