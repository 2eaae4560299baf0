package joiner

import (
	"net"
	"strings"
	"testing"

	"stratum/crypto"
	"stratum/internal/stratumtest/fakefounder"
	"stratum/internal/syncbuf"
)

// Given several founders, the joiner moves past one that does not answer
// and finishes its join through the next (an HA founder's replicas).
func TestFailsOverToTheNextFounder(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	delivery, _ := f.Delivery(t, "n-abc12def", "unseal-"+crypto.RandomHex(24))
	f.AcceptOn("registered", delivery)
	// A founder that died: its port refuses connections.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	var out syncbuf.Buffer
	cfg := testConfig(t, f, &out)
	cfg.Founder = dead + "," + f.Addr()
	cfg.InsecureStoreUnsealKey = true
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	contains(t, out.String(), "trying the founder at "+f.Addr())
	// The retry line after the failover names where it goes, not only
	// the dead founder's error.
	contains(t, out.String(), "; retrying at "+f.Addr()+" in ")
	contains(t, out.String(), "state: joined")
}

func TestFounderListValidated(t *testing.T) {
	c := Config{Founder: "192.0.2.10:9443,nope", Token: "t", CAPin: "sha256:" + strings.Repeat("AB", 32)}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("validate = %v", err)
	}
}
