package httpapi_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"stratum/crypto"
	"stratum/httpapi"
	"stratum/iam"
	"stratum/join"
	"stratum/wire"
)

// A joiner whose long-poll connections drop (a failover, an agent
// restart) gets its holds back (SPEC 10.10 caps concurrent long-polls,
// and a dead connection is not one): after four dropped polls the
// registration's next poll is held, not refused with 429 (review
// finding: it was 429 for up to a minute).
func TestTrust10_DroppedPollGivesItsHoldBack(t *testing.T) {
	now := time.Now()
	db, id, _, ca := devStore(t, now)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	joins, err := join.New(join.Config{DB: db, Now: time.Now, JoinAddr: "127.0.0.1:8443", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer joins.Close()
	d := storeDeps(db)
	d.Log = quiet
	d.ClusterRelease = func() string { return id.ClusterRelease }
	d.JoinAdmin, d.Joiners = joins, joins
	api := httpapi.New(d)
	l, _ := ca.Issue(crypto.LeafRequest{CommonName: "joiner", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Client: true, Validity: time.Hour}, now)
	pair, _ := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	jt, err := joins.CreateToken(iam.Principal{Subject: "user:" + id.AdminEmail}, wire.JoinTokenRequest{Role: "worker", Uses: 10})
	if err != nil {
		t.Fatal(err)
	}
	view, _, err := joins.Register(crypto.SPKIPin(leaf), wire.RegisterRequest{Token: jt.Token, Release: id.ClusterRelease, Hostname: "node-a", MgmtIP: "10.0.0.9"})
	if err != nil {
		t.Fatal(err)
	}
	h := api.JoinHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.TLS = &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{leaf}}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	req := "GET /v1/join/registrations/" + view.JoinID + "?wait=60&state=" + view.State + " HTTP/1.1\r\nHost: x\r\n\r\n"
	for range 4 {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, req)
		time.Sleep(100 * time.Millisecond) // parked
		c.Close()                          // the joiner goes away
	}
	time.Sleep(200 * time.Millisecond)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, req)
	c.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the only live poll of the registration answered %q (%v): four dropped connections still hold its places", strings.TrimSpace(line), err)
	}
}
