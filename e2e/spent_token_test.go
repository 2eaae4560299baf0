package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"stratum/internal/stratumtest"
)

// TestSpentTokenRegistersNothing: on the real binary, a join token used
// up, or revoked after a use, registers no one more, however often it is
// tried. The founder's precheck lets a token on without reading it when
// the batch that last read it found it redeemable (join.precheck), so
// the refusal must come from the batch's own read of the token; the
// tries after the first then meet the precheck's read.
func TestSpentTokenRegistersNothing(t *testing.T) {
	dir := t.TempDir()
	f := stratumtest.ServeDev(t, dir)
	email, password := credentials(t, dir)
	admin := f.Login(t, email, password).Token
	caFile := filepath.Join(f.Dir, "ca.pem")
	url := "https://" + f.Join + "/v1/join/registrations"
	register := func(token, host string) (int, []byte) {
		return newJoinerClient(t, caFile).do(t, "POST", url, map[string]any{"token": token, "release": "0.1.0", "hostname": host, "mgmtIp": "192.0.2.77"})
	}
	token := func(uses int) (tok, id string) {
		status, body, err := call(f, "POST", "/v1/admin/join/tokens", admin, map[string]any{"role": "worker", "ttl": "1h", "uses": uses})
		var jt struct{ Token, TokenID string }
		if err != nil || status != 201 || json.Unmarshal(body, &jt) != nil || jt.Token == "" {
			t.Fatalf("join token: %d %s %v", status, body, err)
		}
		return jt.Token, jt.TokenID
	}
	refusedAll := func(tok, name string) {
		t.Helper()
		for i := range 3 {
			status, body := register(tok, name+"-late-"+string(rune('a'+i)))
			if status != 401 || !strings.Contains(string(body), "JOIN_TOKEN_INVALID") {
				t.Errorf("%s token, try %d: %d %s, want 401 JOIN_TOKEN_INVALID", name, i+1, status, body)
			}
		}
	}

	spent, _ := token(1)
	if status, body := register(spent, "spent-first"); status != 201 {
		t.Fatalf("first use: %d %s", status, body)
	}
	refusedAll(spent, "spent")

	revoked, id := token(5)
	if status, body := register(revoked, "revoked-first"); status != 201 {
		t.Fatalf("first use: %d %s", status, body)
	}
	if status, body, err := call(f, "DELETE", "/v1/admin/join/tokens/"+id, admin, nil); err != nil || status >= 300 {
		t.Fatalf("revoke: %d %s %v", status, body, err)
	}
	refusedAll(revoked, "revoked")

	// Only the two first uses registered anyone.
	status, body, err := call(f, "GET", "/v1/admin/join/registrations", admin, nil)
	var list struct{ Registrations []struct{ JoinID string } }
	if err != nil || status != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("list: %d %s %v", status, body, err)
	}
	if len(list.Registrations) != 2 {
		t.Errorf("%d registrations, want the 2 first uses: %s", len(list.Registrations), body)
	}
}
