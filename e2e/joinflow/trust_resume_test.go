package joinflow

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// TestTrust10_ResumedTicketKeepsItsKey: the join listener resumes TLS
// sessions, and a resumed connection is the key of the handshake that
// earned its ticket. A client holding key B's certificate and key A's
// ticket is A: B's registration is 404 to it (as to any other key), A's
// own registration and long-poll answer 200 on resumed connections.
func TestTrust10_ResumedTicketKeepsItsKey(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	token := joinToken(t, f, 2)
	keyA, keyB := stratumtest.NewJoinerKey(t), stratumtest.NewJoinerKey(t)
	ticketsA := tls.NewLRUClientSessionCache(4)
	// Each request on a connection of its own, so each after the first
	// resumes (or not) afresh.
	client := func(key *stratumtest.JoinerKey, tickets tls.ClientSessionCache) *http.Client {
		tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: f.Pool,
			Certificates: []tls.Certificate{key.Cert}, ClientSessionCache: tickets, MinVersion: tls.VersionTLS13}}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Timeout: time.Minute, Transport: tr}
	}
	get := func(c *http.Client, path string) (status int, resumed bool, raw []byte) {
		t.Helper()
		resp, err := c.Get("https://" + f.Join + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		raw, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, resp.TLS != nil && resp.TLS.DidResume, raw
	}
	joinID := func(c *http.Client, mgmt, host string) string {
		t.Helper()
		a := send(t, c, "POST", "https://"+f.Join+"/v1/join/registrations", "", map[string]any{"token": token, "release": "0.2.0", "hostname": host, "mgmtIp": mgmt}).want(t, 201, "")
		var v struct{ JoinID string }
		if err := json.Unmarshal(a.raw, &v); err != nil || v.JoinID == "" {
			t.Fatalf("registration answer %s", a.raw)
		}
		return v.JoinID
	}
	a := client(keyA, ticketsA)
	idA := joinID(a, "192.0.2.71", "lab-a")
	idB := joinID(client(keyB, nil), "192.0.2.72", "lab-b")

	// A's next connection resumes, and is A.
	if status, resumed, raw := get(a, "/v1/join/registrations/"+idA); status != 200 || !resumed {
		t.Fatalf("A's registration from A's resumed connection: %d resumed=%v %s", status, resumed, raw)
	}
	// The attack: B's certificate, A's ticket. The connection resumes as A.
	thief := client(keyB, ticketsA)
	if status, resumed, raw := get(thief, "/v1/join/registrations/"+idB); status != 404 || !resumed {
		t.Fatalf("B's registration asked with A's ticket: %d resumed=%v %s, want 404 on a resumed connection", status, resumed, raw)
	}
	if status, resumed, raw := get(thief, "/v1/join/registrations/"+idA); status != 200 || !resumed {
		t.Fatalf("A's registration asked with A's ticket under B's certificate: %d resumed=%v %s, want 200 (the ticket is A)", status, resumed, raw)
	}
	// A waiting joiner's rounds: the founder parks the long-poll and closes
	// the connection after its answer; the next round resumes.
	for round := range 2 {
		status, resumed, raw := get(a, "/v1/join/registrations/"+idA+"?wait=1&state=pending")
		if status != 200 || !resumed {
			t.Fatalf("long-poll round %d: %d resumed=%v %s", round, status, resumed, raw)
		}
	}
	// B, with its own key and no ticket, still reads its own.
	if status, _, raw := get(client(keyB, nil), "/v1/join/registrations/"+idB); status != 200 {
		t.Fatalf("B's own registration: %d %s", status, raw)
	}
}
