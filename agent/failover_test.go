package agent

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Given several founders, the agent moves to the next one after a
// network error or a 5xx, and stays with one that answers.
func TestClientFailsOver(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"code":"UNAVAILABLE","message":"lost its database"}`))
	}))
	defer unavailable.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{}`)) }))
	defer live.Close()

	c := &client{bases: []string{dead, unavailable.URL, live.URL}, hc: http.DefaultClient}
	ctx := context.Background()
	for i, want := range []bool{false, false, true, true} {
		_, err := c.call(ctx, http.MethodGet, "/v1/cluster/members", nil, 5*time.Second)
		if (err == nil) != want {
			t.Fatalf("call %d: %v (want success %v)", i, err, want)
		}
	}
	if c.base() != live.URL {
		t.Fatalf("the client left the founder that answers: %s", c.base())
	}
	if _, err := apiBases("https://a:8443, https://b:8443"); err != nil {
		t.Fatal(err)
	}
	if _, err := apiBases("https://a:8443,http://b:8443"); err == nil {
		t.Fatal("a plain-http replica was accepted")
	}
}
