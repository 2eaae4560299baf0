package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"stratum/internal/stratumtest"
)

// TestJoinRefusalsHintOnce runs the real joiner against the real founder:
// each refusal prints its advice once, and a machine that does not say
// which release it runs is told the exact flag, with the cluster's release.
func TestJoinRefusalsHintOnce(t *testing.T) {
	dir := t.TempDir()
	f := stratumtest.ServeDev(t, dir)
	admin := f.Admin(t).Token
	status, body, err := call(f, "POST", "/v1/admin/join/tokens", admin, map[string]any{"role": "worker"})
	if err != nil || status != 201 {
		t.Fatalf("create join token: %d %s %v", status, body, err)
	}
	var tok struct {
		Token       string `json:"token"`
		JoinCommand string `json:"joinCommand"`
	}
	if err := json.Unmarshal(body, &tok); err != nil {
		t.Fatal(err)
	}
	pin := caPin(t, filepath.Join(dir, "ca.pem"))
	join := func(token string, extra ...string) result {
		node := t.TempDir()
		args := append([]string{"join", "--founder", f.Join, "--token", token, "--ca-pin", pin,
			"--root", filepath.Join(node, "root"), "--state-dir", filepath.Join(node, "state"), "--tpm", filepath.Join(node, "no-tpm")}, extra...)
		return stratum(t, args...)
	}

	for _, tc := range []struct {
		name   string
		token  string
		extra  []string
		want   string // in stderr
		advice string // said exactly once
		code   int    // a refused token is 3, as a refused credential is for every command (help exit-codes)
	}{
		{name: "refused token", token: "sjt1.jt-aaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbb", extra: []string{"--release", "0.1.0"},
			want: "JOIN_TOKEN_INVALID", advice: "ask the operator", code: 3},
		{name: "refused token, release unknown", token: "sjt1.jt-aaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbb",
			want: "JOIN_TOKEN_INVALID", advice: "ask the operator", code: 3},
		{name: "release unknown", token: tok.Token,
			want: "give it with --release, e.g. --release 0.1.0,", advice: "e.g. --release", code: 1},
		{name: "newer release", token: tok.Token, extra: []string{"--release", "0.2.0"},
			want: "RELEASE_MISMATCH", advice: "install it with the cluster's release", code: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := join(tc.token, tc.extra...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", r.code, r.stderr, tc.code, tc.want)
			}
			if n := strings.Count(r.stdout+r.stderr, tc.advice); n != 1 {
				t.Errorf("%q printed %d times, want once:\n%s%s", tc.advice, n, r.stdout, r.stderr)
			}
		})
	}
	// A wrong pin: the refusal says the pins differ and where the right
	// one is printed, and never prints the pin of the CA that answered
	// (pasted as --ca-pin, it would trust whoever answered first).
	wrongPin := "sha256:" + strings.Repeat("ab", 32)
	r := join(tok.Token, "--release", "0.1.0", "--ca-pin", wrongPin)
	if r.code != 4 || !strings.Contains(r.stderr, "another pin") || !strings.Contains(r.stderr, wrongPin) {
		t.Errorf("a wrong --ca-pin: exit %d, want 4 (an untrusted founder) and a refusal naming the pin given:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, strings.TrimPrefix(pin, "sha256:")) {
		t.Errorf("a wrong --ca-pin prints the presented CA's pin:\n%s%s", r.stdout, r.stderr)
	}
	for _, where := range []string{"stratum serve", "stratum token create"} {
		if !strings.Contains(r.stderr, where) {
			t.Errorf("a wrong --ca-pin does not say the right pin is printed by %s:\n%s", where, r.stderr)
		}
	}

	// Nothing above spent the token: the printed command still joins as
	// far as registering (a --dev founder's names the release).
	if !strings.HasSuffix(tok.JoinCommand, " --release 0.1.0") {
		t.Errorf("a --dev founder's joinCommand %q does not name the cluster's release", tok.JoinCommand)
	}
	status, body, err = call(f, "GET", "/v1/admin/join/tokens", admin, nil)
	if err != nil || status != 200 || !strings.Contains(string(body), `"usesLeft":1`) {
		t.Errorf("the refused registrations spent the token: %d %s %v", status, body, err)
	}
}
