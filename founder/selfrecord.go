package founder

import (
	"os"
	"strings"

	"stratum/osrelease"
	"stratum/releaseset"
)

// hostRecord is the founder's own release as it sees its host: os-release,
// the kernel, its own build as the control plane and its store schema.
func hostRecord(build releaseset.ControlPlane) releaseset.Record {
	rec := releaseset.Record{ControlPlane: &build}
	// The founder's host binaries are its own build.
	commit := build.Commit
	if !isHexCommit(commit) {
		commit = releaseset.CommitUnknown
	}
	rec.HostBinaries = &releaseset.HostBinaries{Source: releaseset.SourceControlPlaneImage, Commit: commit}
	osr, _ := osrelease.Read("/") // unreadable: the fields stay empty, the record is still sent
	rec.OS = &releaseset.OS{
		PrettyName:   osr["PRETTY_NAME"],
		ID:           osr["ID"],
		VersionID:    osr["VERSION_ID"],
		ImageVersion: osr["IMAGE_VERSION"],
		BuildID:      osr["BUILD_ID"],
		Kernel:       readTrimmed("/proc/sys/kernel/osrelease"),
	}
	// bootc/ostree marks an image-mode boot with this file.
	if _, err := os.Stat("/run/ostree-booted"); err == nil {
		rec.ImageMode = true
	}
	return rec
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func isHexCommit(s string) bool {
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
