// Package freeport picks a TCP port for a test's server that a moment
// later is still free to bind: one below the kernel's ephemeral range.
//
// The usual trick, listening on port 0 and closing, hands out a port of
// the ephemeral range, the same range every outgoing connection takes its
// source port from. Between the pick and the server's bind, one of the
// many loopback connections of the test packages running beside it could
// take the port ("bind: address already in use", seen in CI). Nothing
// takes a port below the range unasked.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowest is the first port a pick may return: above the well-known and
// the usual registered service ports a developer's machine may run.
const lowest = 10000

// Pick returns a port nothing listens on at ip right now, below the
// ephemeral range.
func Pick(ip string) (int, error) {
	top := ephemeralStart()
	for range 200 {
		port := lowest + rand.IntN(max(top-lowest, 1))
		if l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s between %d and %d", ip, lowest, top)
}

// Must is Pick for a test: a failure ends it.
func Must(t testing.TB, ip string) int {
	t.Helper()
	port, err := Pick(ip)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// ephemeralStart is the first port of net.ipv4.ip_local_port_range
// (Linux's default 32768 where it cannot be read).
func ephemeralStart() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lowest {
				return n
			}
		}
	}
	return 32768
}
