package cli

import (
	"context"
	"net"
	"net/http"
	"time"
)

// The CLI is the one client of a running founder's control socket
// (DATA/control.sock: backup, audit verify, openbao converge); the
// founder serves it (founder/control.go). The socket's file mode is the
// authorization: only who can reach the data directory can ask.

// controlClient talks HTTP over the control socket at sock; timeout 0 is
// none (a backup streams as long as it takes).
func controlClient(sock string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "unix", sock)
	}}}
}
