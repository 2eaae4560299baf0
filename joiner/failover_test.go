package joiner

import (
	"net"
	"strings"
	"testing"

	"stratum/crypto"
)

// Given several founders, the joiner moves past one that does not answer
// and finishes its join through the next (an HA founder's replicas).
func TestFailsOverToTheNextFounder(t *testing.T) {
	f := newFakeFounder(t, "0.6.0")
	delivery, _ := f.delivery(t, "n-abc12def", "unseal-"+crypto.RandomHex(24))
	f.acceptOn("registered", delivery)
	// A founder that died: its port refuses connections.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	var out syncBuffer
	cfg := testConfig(t, f, &out)
	cfg.Founder = dead + "," + f.addr()
	cfg.InsecureStoreUnsealKey = true
	if err := runJoiner(t, cfg); err != nil {
		t.Fatalf("join: %v\n%s", err, out.String())
	}
	contains(t, out.String(), "trying the founder at "+f.addr())
	contains(t, out.String(), "state: joined")
}

func TestFounderListValidated(t *testing.T) {
	c := Config{Founder: "192.0.2.10:9443,nope", Token: "t", CAPin: "sha256:" + strings.Repeat("AB", 32)}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("validate = %v", err)
	}
}
