package join

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"stratum/apierr"
	"stratum/wire"
)

func TestRegisterReleaseRule(t *testing.T) {
	tests := []struct {
		name        string
		opts        []option
		release     string
		selfUpgrade bool
		state       string
		reason      string // RELEASE_MISMATCH details.reason
		source      string
	}{
		{name: "equal", release: "0.6.0", state: wire.StatePending},
		{name: "older with self-upgrade, founder serves", release: "0.5.0", selfUpgrade: true, state: wire.StateNeedsUpgrade},
		{name: "older with self-upgrade, mirror", opts: []option{func(c *Config) { c.MirrorURL = "https://mirror.example/releases/stratum/" }},
			release: "0.5.0", selfUpgrade: true, state: wire.StateNeedsUpgrade, source: "https://mirror.example/releases/stratum/0.6.0"},
		{name: "older without self-upgrade", release: "0.5.0", reason: ReasonNoSelfUpgrade},
		{name: "older, nothing to offer", opts: []option{func(c *Config) { c.Payloads = nil }}, release: "0.5.0", selfUpgrade: true, reason: ReasonNoPayload},
		{name: "older, other release imported", opts: []option{func(c *Config) { c.Payloads = offered{"0.7.0": true} }}, release: "0.5.0", selfUpgrade: true, reason: ReasonNoPayload},
		{name: "newer", release: "0.7.0", selfUpgrade: true, reason: ReasonNewer},
		{name: "pre-release of the cluster release is older", release: "0.6.0-rc.1", reason: ReasonNoSelfUpgrade},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			tok := e.token("worker", 1)
			v, created, err := e.register("a", tok, tc.release, tc.selfUpgrade)
			if tc.reason != "" {
				ae := wantCode(t, err, apierr.ReleaseMismatch)
				want := map[string]any{"joinerRelease": tc.release, "clusterRelease": clusterRelease, "reason": tc.reason}
				for k, w := range want {
					if ae.Details[k] != w {
						t.Errorf("details[%s] = %v, want %v", k, ae.Details[k], w)
					}
				}
				list, _ := e.svc.ListTokens()
				if list[0].UsesLeft != 1 {
					t.Errorf("a refused registration spent the token: usesLeft %d", list[0].UsesLeft)
				}
				regs, _ := e.svc.List("")
				if len(regs) != 0 {
					t.Errorf("a refused registration was stored: %+v", regs)
				}
				return
			}
			if err != nil || !created {
				t.Fatalf("register: %v", err)
			}
			if v.State != tc.state {
				t.Fatalf("state %s, want %s", v.State, tc.state)
			}
			if !regexp.MustCompile(`^j-[a-z0-9]{8}$`).MatchString(v.JoinID) {
				t.Errorf("joinId %q", v.JoinID)
			}
			if tc.state == wire.StateNeedsUpgrade {
				want := wire.Upgrade{From: tc.release, To: clusterRelease, Source: tc.source}
				if v.Upgrade == nil || *v.Upgrade != want {
					t.Errorf("upgrade %+v, want %+v", v.Upgrade, want)
				}
			} else if v.Upgrade != nil {
				t.Errorf("upgrade present in %s", v.State)
			}
		})
	}
}

func TestReRegister(t *testing.T) {
	e := newEnv(t)
	tok := e.token("control-plane", 1)
	v, created, err := e.register("a", tok, "0.5.0", true)
	if err != nil || !created || v.State != wire.StateNeedsUpgrade {
		t.Fatalf("first: %+v %v %v", v, created, err)
	}
	// Still upgrading: the same registration, no token use (the token has
	// no use left, so a use would fail).
	again, created, err := e.register("a", tok, "0.5.0", true)
	if err != nil || created || again.JoinID != v.JoinID || again.State != wire.StateNeedsUpgrade {
		t.Fatalf("again: %+v %v %v", again, created, err)
	}
	if rel, err := e.svc.OfferedRelease(keyPin("a"), v.JoinID); err != nil || rel != clusterRelease {
		t.Errorf("offered release %q %v", rel, err)
	}
	if _, err := e.svc.OfferedRelease(keyPin("b"), v.JoinID); apierr.CodeOf(err) != apierr.NotFound {
		t.Errorf("another key is offered the release: %v", err)
	}
	// Upgraded: pending, same id.
	up, created, err := e.register("a", tok, clusterRelease, true)
	if err != nil || created || up.JoinID != v.JoinID || up.State != wire.StatePending || up.Upgrade != nil || up.Release != clusterRelease {
		t.Fatalf("upgraded: %+v %v %v", up, created, err)
	}
	if _, err := e.svc.OfferedRelease(keyPin("a"), v.JoinID); apierr.CodeOf(err) != apierr.NotFound {
		t.Errorf("a pending join is still offered the release: %v", err)
	}
	// Final: the key needs a new token.
	if _, err := e.svc.Reject(e.admin, v.JoinID, "wrong rack"); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.register("a", tok, clusterRelease, false)
	wantCode(t, err, apierr.JoinTokenInvalid)
	fresh, created, err := e.register("a", e.token("worker", 1), clusterRelease, false)
	if err != nil || !created || fresh.JoinID == v.JoinID || fresh.Role != "worker" {
		t.Fatalf("new registration: %+v %v %v", fresh, created, err)
	}
}

func TestDecodeRegisterRequest(t *testing.T) {
	ok := `{"token":"sjt1.a.b","release":"0.5.0","selfUpgrade":true,"hostname":"lab-2","mgmtIp":"192.0.2.12","machineId":"abc","facts":{"cpu":{"count":4}}}`
	req, err := DecodeRegisterRequest([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if req.Hostname != "lab-2" || !req.SelfUpgrade || string(req.Facts) != `{"cpu":{"count":4}}` {
		t.Errorf("decoded %+v", req)
	}
	big := `{"token":"t","release":"0.6.0","hostname":"h","facts":{"x":"` + strings.Repeat("a", 64<<10) + `"}}`
	tests := []struct {
		name   string
		body   string
		fields []string
	}{
		{"unknown fields named", `{"token":"t","release":"0.6.0","hostname":"h","role":"x","nodeId":"y"}`, []string{"nodeId", "role"}},
		{"every problem at once", `{"release":"six","hostname":"bad host","mgmtIp":"192.0.2.1/24","facts":[1]}`, []string{"token", "release", "hostname", "mgmtIp", "facts"}},
		{"facts over 64 KiB", big, []string{"facts"}},
		{"wrong types", `{"token":5,"release":"0.6.0","hostname":"h","selfUpgrade":"yes"}`, []string{"token", "selfUpgrade"}},
		{"empty body", ``, []string{"token", "release", "hostname"}},
		{"malformed", `{"token":"t",}`, []string{""}},
		{"a v prefix is not a release", `{"token":"t","release":"v0.6.0","hostname":"h"}`, []string{"release"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRegisterRequest([]byte(tc.body))
			wantCode(t, err, apierr.InvalidInput)
			got := fieldNames(err)
			slices.Sort(got)
			want := slices.Clone(tc.fields)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("fields %v, want %v", got, want)
			}
		})
	}
}

// TestRegisterRefusedInSharedBatch: registrations refused inside a group
// commit (a release the cluster does not admit, a management address that
// is the founder's) are answered with their refusal, write nothing, and
// leave the good registrations of the same batch created.
func TestRegisterRefusedInSharedBatch(t *testing.T) {
	e := newEnv(t)
	const n = 24
	tok := e.token("worker", n)
	type result struct {
		created bool
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := wire.RegisterRequest{Token: tok, Release: clusterRelease, Hostname: fmt.Sprintf("lab-%d", i), MgmtIP: fmt.Sprintf("198.51.100.%d", 10+i)}
			switch i % 3 {
			case 1:
				req.Release = "0.7.0" // newer than the cluster: RELEASE_MISMATCH
			case 2:
				req.MgmtIP = "0.0.0.0" // no host's address: INVALID_INPUT
			}
			_, created, err := e.svc.Register(keyPin(fmt.Sprint("k", i)), req)
			results[i] = result{created, err}
		}()
	}
	wg.Wait()
	for i, r := range results {
		switch i % 3 {
		case 0:
			if r.err != nil || !r.created {
				t.Errorf("good registration %d: created=%v err=%v", i, r.created, r.err)
			}
		case 1:
			wantCode(t, r.err, apierr.ReleaseMismatch)
		case 2:
			wantCode(t, r.err, apierr.InvalidInput)
		}
	}
	list, _ := e.svc.ListTokens()
	if list[0].UsesLeft != n-n/3 {
		t.Errorf("token usesLeft %d, want %d (only the good registrations spend it)", list[0].UsesLeft, n-n/3)
	}
	if regs, _ := e.svc.List(""); len(regs) != n/3 {
		t.Errorf("%d registrations stored, want %d", len(regs), n/3)
	}
}
