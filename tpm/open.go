package tpm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"
)

// DefaultPath is the kernel's resource-managed TPM device. The resource
// manager lets the boot unseal service and other TPM users share the chip.
const DefaultPath = "/dev/tpmrm0"

// Open connects to the TPM at path: a character device such as /dev/tpmrm0,
// or the unix socket of a socket TPM such as swtpm. An empty path means
// DefaultPath. When nothing answers there the error wraps ErrNoTPM.
func Open(path string) (transport.TPMCloser, error) {
	if path == "" {
		path = DefaultPath
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: nothing exists at that path", ErrNoTPM, path)
	}
	if err != nil {
		return nil, fmt.Errorf("TPM: %w", err)
	}
	switch mode := fi.Mode(); {
	case mode&fs.ModeSocket != 0:
		return openSocket(path)
	case mode&fs.ModeCharDevice != 0:
		t, err := linuxtpm.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open TPM %s: %w", path, err)
		}
		return t, nil
	default:
		return nil, fmt.Errorf("%w at %s: it is neither a character device nor a unix socket (%s)", ErrNoTPM, path, mode)
	}
}

// openSocket probes the socket first: linuxudstpm only dials when the first
// command is sent, and a stale socket file left by a dead swtpm must read as
// "no TPM" rather than fail halfway through sealing.
func openSocket(path string) (transport.TPMCloser, error) {
	c, err := dialTPMSocket(path, socketDialPatience)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: the TPM socket does not answer: %v", ErrNoTPM, path, err)
	}
	_ = c.Close()
	return openSocketTransport(path), nil
}
