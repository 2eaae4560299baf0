package joiner

import (
	"crypto/tls"
	"errors"
	"io"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/internal/stratumtest/fakefounder"
)

// TestPinnedTLSResumesAndChecksThePin: the second connection to the
// founder resumes the first one's TLS session, VerifyConnection (the CA
// pin) runs on the resumed connection too, and a configuration with
// another pin refuses the founder even when it holds a ticket for it.
func TestPinnedTLSResumesAndChecksThePin(t *testing.T) {
	f := fakefounder.New(t, fakefounder.Options{})
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := id.ClientCertificate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := crypto.NewCA("cl-other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tickets := newTicketCache()
	var verified []bool // DidResume of each connection VerifyConnection saw
	dial := func(pin string) (*tls.Conn, error) {
		cfg := pinnedTLS(pin, cert, "127.0.0.1", scopedTickets{"founder", tickets})
		check := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			verified = append(verified, cs.DidResume)
			return check(cs)
		}
		c, err := tls.Dial("tcp", f.Addr(), cfg)
		if err != nil {
			return nil, err
		}
		// A request and its answer: the ticket comes after the handshake.
		if _, err := io.WriteString(c, "GET /v1/join/registrations/none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, c)
		c.Close()
		return c, nil
	}
	for i, wantResumed := range []bool{false, true, true} {
		c, err := dial(f.CA.Pin())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if got := c.ConnectionState().DidResume; got != wantResumed {
			t.Fatalf("connection %d resumed = %v, want %v", i, got, wantResumed)
		}
		if len(verified) != i+1 || verified[i] != wantResumed {
			t.Fatalf("connection %d: VerifyConnection saw %v, want one call per connection ending with resumed=%v", i, verified, wantResumed)
		}
	}
	if _, ok := tickets.Get("founder|127.0.0.1"); !ok {
		t.Fatal("no ticket under the founder's scope")
	}
	_, err = dial(other.Pin())
	var pe *PinError
	if !errors.As(err, &pe) {
		t.Fatalf("another pin with the founder's ticket: want a PinError, got %v", err)
	}
	if len(verified) != 4 || !verified[3] {
		t.Fatalf("the refused connection was not a resumed one checked by VerifyConnection: %v", verified)
	}
}

// TestScopedTicketsApart: the founder's and a mirror's tickets under the
// same server name do not replace each other.
func TestScopedTicketsApart(t *testing.T) {
	shared := newTicketCache()
	founder, mirror := scopedTickets{"founder", shared}, scopedTickets{"mirror", shared}
	a, b := &tls.ClientSessionState{}, &tls.ClientSessionState{}
	founder.Put("host", a)
	mirror.Put("host", b)
	if got, _ := founder.Get("host"); got != a {
		t.Error("the founder's ticket was replaced by the mirror's")
	}
	if got, _ := mirror.Get("host"); got != b {
		t.Error("the mirror's ticket was replaced by the founder's")
	}
}
