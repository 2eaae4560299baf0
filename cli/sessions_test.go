package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"stratum/wire"
)

// TestSessionsListMarksTheCurrentSession: of the sessions the founder
// lists, the one whose token this command sent is marked *, and only it;
// -o json stays the API's answer.
func TestSessionsListMarksTheCurrentSession(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sessions := []wire.TokenView{
		{ID: "tok-aaaaaaaaaa", Kind: "session", Subject: "admin@example.com", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{ID: "tok-bbbbbbbbbb", Kind: "session", Subject: "admin@example.com", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{ID: "tok-cccccccccc", Kind: "session", Subject: "ops@example.com", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
	}
	api, ca := apiStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"sessions": sessions})
	})
	t.Setenv("STRATUM_TOKEN", "sat1.tok-bbbbbbbbbb.secretsecretsecret")
	var out, errb bytes.Buffer
	if code := Execute(context.Background(), []string{"sessions", "list", "--api", api, "--ca-file", ca}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !regexp.MustCompile(`(?m)^\*\s+tok-bbbbbbbbbb\s`).MatchString(out.String()) {
		t.Errorf("the current session is not marked *:\n%s", out.String())
	}
	if n := strings.Count(out.String(), "*"); n != 1 {
		t.Errorf("%d sessions marked, want 1:\n%s", n, out.String())
	}
	out.Reset()
	if code := Execute(context.Background(), []string{"sessions", "list", "--api", api, "--ca-file", ca, "-o", "json"}, nil, &out, &errb); code != 0 || strings.Contains(out.String(), "current") {
		t.Errorf("-o json: exit %d, %s", code, out.String())
	}
}
