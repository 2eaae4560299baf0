package hostrecord

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"stratum/osrelease"
	"stratum/wire"
)

// collectOS reads ROOT/etc/os-release, else OSFallback's when ROOT has
// none (the agent's is this host's /: a node joined under a temporary
// --root runs on this host's OS), and the running kernel (uname). os is
// left absent only when neither can be read.
func collectOS(_ context.Context, h *Host, rec *wire.Record) error {
	osr, osErr := osrelease.Read(h.Root)
	if osErr == nil && len(osr) == 0 && h.OSFallback != "" && filepath.Clean(h.OSFallback) != filepath.Clean(h.Root) {
		osr, osErr = osrelease.Read(h.OSFallback)
	}
	if osErr == nil && len(osr) == 0 {
		osErr = errors.New("no os-release file (etc/os-release, usr/lib/os-release)")
	}
	kernel, kErr := Kernel()
	if osErr != nil && kErr != nil {
		return fmt.Errorf("os-release: %v; uname: %v", osErr, kErr)
	}
	o := &wire.OS{Kernel: kernel}
	if osErr == nil {
		o.PrettyName, o.ID, o.VersionID = osr["PRETTY_NAME"], osr["ID"], osr["VERSION_ID"]
		o.ImageVersion, o.BuildID = osr["IMAGE_VERSION"], osr["BUILD_ID"]
	}
	rec.OS = o
	switch {
	case osErr != nil:
		return fmt.Errorf("os-release: %v (kernel read)", osErr)
	case kErr != nil:
		return fmt.Errorf("uname: %v (os-release read)", kErr)
	}
	return nil
}

// Kernel is the running kernel's release, as uname -r prints it.
func Kernel() (string, error) {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "", err
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	if len(b) == 0 {
		return "", fmt.Errorf("uname gave no kernel release")
	}
	return string(b), nil
}
