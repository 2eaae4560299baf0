package labtest

import (
	"net"
	"slices"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// The founder's ports in its namespace: fixed (nothing else listens
// there), so a founder restarted on the same data directory is where the
// joiners and agents left it.
const (
	APIPort  = "8443"
	JoinPort = "9443"
)

// StartFounder starts `stratum serve` in the founder's namespace with o
// (its Dir defaults to one in the lab; its listeners are the founder
// host's address on APIPort and JoinPort; on a lab with TPMs it trusts
// the lab's TPM manufacturer, --ek-ca, unless o names a pool) and makes
// it the lab's founder.
func (l *Lab) StartFounder(t testing.TB, o stratumtest.FounderOptions) *stratumtest.Founder {
	t.Helper()
	if o.Dir == "" {
		o.Dir = l.FounderHost.Dir + "/data"
	}
	if l.EKRootCA != "" && !slices.Contains(o.Args, "--ek-ca") {
		o.Args = append(slices.Clone(o.Args), "--ek-ca", l.EKRootCA, "--ek-ca", l.EKIssuerCA)
	}
	o.Wrap = l.FounderHost.Wrap()
	o.APIAddr = net.JoinHostPort(l.FounderHost.IP.String(), APIPort)
	o.JoinAddr = net.JoinHostPort(l.FounderHost.IP.String(), JoinPort)
	f := stratumtest.StartFounder(t, o)
	l.mu.Lock()
	l.founder, l.fopts = f, o
	l.mu.Unlock()
	return f
}

// Founder is the lab's current founder (the restarted one after
// RestartFounder).
func (l *Lab) Founder() *stratumtest.Founder {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.founder
}

// KillFounder kills the founder with SIGKILL, as a power cut does, and
// waits for it to be gone.
func (l *Lab) KillFounder(t testing.TB) {
	t.Helper()
	f := l.Founder()
	f.Kill()
	if code := f.ExitCode(); code != -9 {
		t.Fatalf("the founder exited %d, not by SIGKILL", code)
	}
}

// RestartFounder starts the founder again on the same data directory and
// addresses, with the options it was first started with.
func (l *Lab) RestartFounder(t testing.TB) *stratumtest.Founder {
	t.Helper()
	l.mu.Lock()
	o := l.fopts
	l.mu.Unlock()
	start := time.Now()
	f := l.StartFounder(t, o)
	t.Logf("lab %s: founder restarted on %s in %v", l.ID, o.Dir, time.Since(start).Round(time.Millisecond))
	return f
}

// APIURL is the founder's admin API as agents dial it; JoinAddr its join
// listener as joiners dial it.
func (l *Lab) APIURL() string {
	return "https://" + net.JoinHostPort(l.FounderHost.IP.String(), APIPort)
}

// JoinAddr is the founder's join listener, HOST:PORT.
func (l *Lab) JoinAddr() string { return net.JoinHostPort(l.FounderHost.IP.String(), JoinPort) }
