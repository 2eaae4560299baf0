package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"stratum/apierr"
)

// TestExitCodesFromAnswers: an admin API answer maps to the exit code by
// its error code, or by its HTTP status when it carries none; never by
// its text (each message below says the opposite of its code).
func TestExitCodesFromAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   any // nil: no envelope
		want   int
	}{
		{"unauthenticated", 401, apierr.New(apierr.Unauthenticated, "not found"), ExitAuth},
		{"forbidden", 403, apierr.New(apierr.Forbidden, "conflict"), ExitAuth},
		{"not found", 404, apierr.New(apierr.NotFound, "forbidden"), ExitNotFound},
		{"conflict", 409, apierr.New(apierr.Conflict, "not found"), ExitConflict},
		{"approval refused", 409, apierr.New(apierr.JoinApprovalRefused, "ok"), ExitConflict},
		{"release mismatch", 409, apierr.New(apierr.ReleaseMismatch, "ok"), ExitConflict},
		{"invalid input", 400, apierr.New(apierr.InvalidInput, "not found"), ExitFailed},
		{"internal", 500, apierr.New(apierr.Internal, "forbidden"), ExitFailed},
		{"bare 401", 401, nil, ExitAuth},
		{"bare 403", 403, nil, ExitAuth},
		{"bare 404", 404, nil, ExitNotFound},
		{"bare 409", 409, nil, ExitConflict},
		{"rate limited", 429, apierr.New(apierr.TooManyRequests, "not found"), ExitRetry},
		{"bare 429", 429, nil, ExitRetry},
		{"join token refused", 401, apierr.New(apierr.JoinTokenInvalid, "conflict"), ExitAuth},
		{"bare 502", 502, nil, ExitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, ca := apiStandIn(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("no bearer token sent")
				}
				w.WriteHeader(tc.status)
				if tc.body != nil {
					json.NewEncoder(w).Encode(tc.body)
				} else {
					w.Write([]byte("<html>proxy error</html>"))
				}
			})
			t.Setenv("STRATUM_TOKEN", "tok")
			var out, errb bytes.Buffer
			code := Execute(context.Background(), []string{"joins", "get", "j-1", "--api", api, "--ca-file", ca}, nil, &out, &errb)
			if code != tc.want {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.want, errb.String())
			}
			if out.Len() != 0 || !strings.HasPrefix(errb.String(), "stratum joins get: ") {
				t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
			}
		})
	}
}

// TestUsageErrors: what cobra refuses before a command runs, and what a
// command refuses as usage, exit 2; help exits 0 on stdout.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, ExitUsage},
		{[]string{"bogus"}, ExitUsage},
		{[]string{"token"}, ExitUsage},
		{[]string{"token", "bogus"}, ExitUsage},
		{[]string{"joins", "get"}, ExitUsage},
		{[]string{"joins", "get", "a", "b"}, ExitUsage},
		{[]string{"joins", "list", "--bogus"}, ExitUsage},
		{[]string{"joins", "list", "-o", "xml"}, ExitUsage},
		{[]string{"release", "sign", "dir"}, ExitUsage},
		{[]string{"help", "bogus"}, ExitUsage},
		{[]string{"join"}, ExitUsage},
		{[]string{"backup", "--out", "/nonexistent/b.bak", "--include-data-key"}, ExitUsage},
		{[]string{"restore", "--in", "/nonexistent/b.bak", "--ca-pin", "sha256:00", "--new-cluster"}, ExitUsage},
		{[]string{"joins", "list", "--help"}, ExitOK},
		{[]string{"help", "exit-codes"}, ExitOK},
		{[]string{"--version"}, ExitOK},
	} {
		var out, errb bytes.Buffer
		if code := Execute(context.Background(), tc.args, strings.NewReader(""), &out, &errb); code != tc.want {
			t.Errorf("stratum %v: exit %d, want %d (stderr %q)", tc.args, code, tc.want, errb.String())
		}
		if tc.want == ExitOK && (out.Len() == 0 || errb.Len() != 0) {
			t.Errorf("stratum %v: stdout %q, stderr %q", tc.args, out.String(), errb.String())
		}
	}
}

// TestLoginMustChangePassword: a login answered with mustChangePassword
// keeps the session and leads to stratum password; every other command
// then refused says the same; stratum password (stdin) changes it with
// the kept session.
func TestLoginMustChangePassword(t *testing.T) {
	changed := false
	api, ca := apiStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/auth/login":
			json.NewEncoder(w).Encode(map[string]any{"token": "sess-1", "expiresAt": "2030-01-01T00:00:00Z", "mustChangePassword": true})
		case "/v1/auth/password":
			var req struct{ CurrentPassword, NewPassword string }
			json.NewDecoder(r.Body).Decode(&req)
			if r.Header.Get("Authorization") != "Bearer sess-1" || req.CurrentPassword != "old-password" || req.NewPassword != "a-new-password-1" {
				t.Errorf("password change: %s %+v", r.Header.Get("Authorization"), req)
			}
			changed = true
			w.WriteHeader(204)
		default:
			e := apierr.New(apierr.Forbidden, "this account must change its password first")
			e.Details = map[string]any{"mustChangePassword": true}
			w.WriteHeader(403)
			json.NewEncoder(w).Encode(e)
		}
	})
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("STRATUM_TOKEN", "")
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), append(args, "--api", api, "--ca-file", ca), strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("old-password\n", "login", "--email", "a@example.com", "--password-stdin"); code != 0 || !strings.Contains(out, "stratum password") {
		t.Fatalf("login: exit %d %q %q", code, out, errs)
	}
	if code, _, errs := run("", "token", "list"); code != ExitAuth || !strings.Contains(errs, "stratum password") {
		t.Fatalf("token list before the change: exit %d %q", code, errs)
	}
	if code, out, errs := run("old-password\na-new-password-1\n", "password"); code != 0 || !changed {
		t.Fatalf("password: exit %d %q %q", code, out, errs)
	}
}
