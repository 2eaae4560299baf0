package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/wire"
)

// Given several founders, the client moves to the next one after a
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

	var notes []string
	c := New([]string{dead, unavailable.URL, live.URL}, http.DefaultClient, Options{Notify: func(s string) { notes = append(notes, s) }})
	ctx := context.Background()
	for i, want := range []bool{false, false, true, true} {
		_, err := c.Call(ctx, Request{Method: http.MethodGet, Path: "/v1/cluster/members", Timeout: 5 * time.Second})
		if (err == nil) != want {
			t.Fatalf("call %d: %v (want success %v)", i, err, want)
		}
	}
	if c.Base() != live.URL {
		t.Fatalf("the client left the founder that answers: %s", c.Base())
	}
	if len(notes) != 2 {
		t.Fatalf("want a line for each of the two failovers, got %q", notes)
	}
}

// With Retry, a 503 is retried after the founder's Retry-After, on the
// next founder; the call returns the answer of the one that works.
func TestClientRetriesOnTheNextFounder(t *testing.T) {
	var busyHits atomic.Int32
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		busyHits.Add(1)
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"code":"RELEASE_BUSY","message":"busy"}`))
	}))
	defer busy.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"joinId":"j-1","state":"pending"}`))
	}))
	defer live.Close()
	c := New([]string{busy.URL, live.URL}, http.DefaultClient, Options{Retry: &Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}})
	var v wire.JoinerView
	status, err := c.Call(context.Background(), Request{Method: "GET", Path: "/v1/join/registrations/j-1", Out: &v})
	if err != nil || status != 200 || v.JoinID != "j-1" || v.State != wire.StatePending {
		t.Fatalf("status %d, view %+v, err %v", status, v, err)
	}
	if busyHits.Load() != 1 {
		t.Fatalf("the busy founder was asked %d times, want once", busyHits.Load())
	}
}

// A 4xx is final: no retry, and its envelope comes back as *apierr.Error
// with its fields (apierr.As finds it through the *RemoteError).
func TestClientDecodesTheEnvelope(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"code":"INVALID_INPUT","message":"the registration has problems","fields":[{"field":"hostname","message":"required"}]}`))
	}))
	defer srv.Close()
	c := New([]string{srv.URL}, http.DefaultClient, Options{Retry: &Backoff{Base: time.Millisecond, Max: time.Millisecond}})
	status, err := c.Call(context.Background(), Request{Method: "POST", Path: "/v1/join/registrations", Body: wire.RegisterRequest{}})
	e, ok := apierr.As(err)
	if !ok || status != 400 || e.Code != apierr.InvalidInput || len(e.Fields) != 1 || e.Fields[0].Field != "hostname" {
		t.Fatalf("status %d, err %v", status, err)
	}
	if !strings.Contains(err.Error(), "hostname: required") {
		t.Fatalf("the message drops the field: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("a 400 was sent %d times", hits.Load())
	}
	// An answer that is not the envelope is still an error with a code.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("<html>bad gateway</html>"))
	}))
	defer proxy.Close()
	_, err = New([]string{proxy.URL}, http.DefaultClient, Options{}).Call(context.Background(), Request{Method: "GET", Path: "/"})
	var re *RemoteError
	if !errors.As(err, &re) || !re.NotEnvelope || re.Err.Code != "HTTP_502" {
		t.Fatalf("a proxy's page: %v", err)
	}
}

// Every request names the protocol version and, when the client has one,
// the bearer token; a 2xx answer over the size limit is refused, not read
// on, and not retried.
func TestClientHeadersAndLimits(t *testing.T) {
	var hits atomic.Int32
	var gotProto, gotAuth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		gotProto.Store(r.Header.Get(wire.ProtocolHeader))
		gotAuth.Store(r.Header.Get("Authorization"))
		w.Write([]byte(`"` + strings.Repeat("x", 2000) + `"`))
	}))
	defer srv.Close()
	c := New([]string{srv.URL}, http.DefaultClient, Options{Token: "s3cret", MaxAnswer: 1000, Retry: &Backoff{Base: time.Millisecond, Max: time.Millisecond}})
	var out json.RawMessage
	_, err := c.Call(context.Background(), Request{Method: "GET", Path: "/v1/releases", Out: &out})
	var tl *TooLargeError
	if !errors.As(err, &tl) || len(out) != 0 {
		t.Fatalf("an oversized answer: %v (%d bytes kept)", err, len(out))
	}
	if hits.Load() != 1 {
		t.Fatalf("an oversized answer was asked for %d times", hits.Load())
	}
	if gotProto.Load() != strconv.Itoa(wire.ProtocolVersion) || gotAuth.Load() != "Bearer s3cret" {
		t.Fatalf("headers: protocol %q, authorization %q", gotProto.Load(), gotAuth.Load())
	}
}

// An error envelope listing a thousand field problems (the founder's cap)
// is read whole: its code and every field reach the caller.
func TestClientReadsALongEnvelope(t *testing.T) {
	fields := make([]map[string]string, 1000)
	for i := range fields {
		fields[i] = map[string]string{"field": "release.pins[" + strconv.Itoa(i) + "].state", "message": "must be current, differs, absent or self, not bogus"}
	}
	body, _ := json.Marshal(map[string]any{"code": "INVALID_INPUT", "message": "the release record is not valid; see fields", "fields": fields})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write(body)
	}))
	defer srv.Close()
	_, err := New([]string{srv.URL}, http.DefaultClient, Options{}).Call(context.Background(), Request{Method: "PUT", Path: "/v1/cluster/nodes/n-1/release"})
	e, ok := apierr.As(err)
	if !ok || e.Code != apierr.InvalidInput || len(e.Fields) != 1000 {
		t.Fatalf("a %d-byte envelope: %v", len(body), err)
	}
}
