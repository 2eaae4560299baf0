package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPickIsBelowTheEphemeralRangeAndFree: every pick lies in
// [lowest, the range's start) and can be bound at once.
func TestPickIsBelowTheEphemeralRangeAndFree(t *testing.T) {
	top := ephemeralStart()
	for range 20 {
		port := Must(t, "127.0.0.1")
		if port < lowest || port >= top {
			t.Fatalf("picked %d, want in [%d, %d)", port, lowest, top)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("picked %d, which cannot be bound: %v", port, err)
		}
		l.Close()
	}
}
