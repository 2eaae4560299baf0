package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestCommitFromBuildSettings(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"clean checkout", []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, rev},
		{"uncommitted changes", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}, "unknown"},
		{"no VCS (-buildvcs=false, a module download)", nil, "unknown"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromSettings(tt.settings); got != tt.want {
				t.Fatalf("commit %q, want %q", got, tt.want)
			}
		})
	}
}
