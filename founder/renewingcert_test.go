package founder

import (
	"bytes"
	"crypto/tls"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"stratum/crypto"
)

// TestRenewingCertRenewed: a founder that runs past two thirds of its
// listener certificate's 90 days serves a new one from the next
// handshake on, keeps the old (still valid) one while issuing fails, and
// a client dialling the listener sees the new certificate.
func TestRenewingCertRenewed(t *testing.T) {
	t0 := time.Now()
	ca, err := crypto.NewCA("cl-tls00001", t0)
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var failing atomic.Bool
	var issued atomic.Int32
	issue := func(at time.Time) (tls.Certificate, error) {
		if failing.Load() {
			return tls.Certificate{}, errors.New("the CA is away")
		}
		issued.Add(1)
		return serverCertificate(ca, "cl-tls00001", "localhost", "", nil, false, at)
	}
	var logs bytes.Buffer
	l, err := newRenewingCert("admin API", issue, now, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := listenTLS("127.0.0.1:0", adminTLS(l.server, ca))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	served := func() (serial string, notAfter time.Time) {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost",
			Time: now}) // the client's clock is the founder's
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		leaf := c.ConnectionState().PeerCertificates[0]
		return leaf.SerialNumber.String(), leaf.NotAfter
	}

	first, firstEnd := served()
	day := 24 * time.Hour
	for _, tc := range []struct {
		at      time.Duration
		failing bool
		same    bool
	}{
		{at: 59 * day, same: true},                // before two thirds of 90 days
		{at: 61 * day, failing: true, same: true}, // due, but issuing fails: the old one, still valid
		{at: 61*day + time.Hour, same: false},     // issued again
		{at: 62 * day, same: true},                // and kept
	} {
		clock.Store(t0.Add(tc.at).UnixNano())
		failing.Store(tc.failing)
		serial, end := served()
		if (serial == first) != tc.same {
			t.Fatalf("day %.1f: serial %s (first %s), want same=%v", tc.at.Hours()/24, serial, first, tc.same)
		}
		if !tc.same {
			if !end.After(firstEnd.Add(60 * day)) {
				t.Fatalf("the new certificate ends %v, the first %v", end, firstEnd)
			}
			first = serial
		}
	}
	if n := issued.Load(); n != 2 {
		t.Errorf("issued %d certificates, want 2 (start, day 61)", n)
	}
	for _, want := range []string{"issuing the admin API's certificate again failed", "issued the admin API's certificate again"} {
		if !bytes.Contains(logs.Bytes(), []byte(want)) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}
