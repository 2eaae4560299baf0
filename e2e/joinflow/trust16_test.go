package joinflow

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stratum/internal/pgtest"
	"stratum/internal/stratumtest"
)

// storeBackends runs a test on the bbolt file and on PostgreSQL.
var storeBackends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"bbolt", func(*testing.T) string { return "" }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

func admission(t *testing.T, f *stratumtest.Founder) string {
	t.Helper()
	v, _ := versionView(t, f, f.Operator(t).Token)["admissionRelease"].(string)
	return v
}

// TestTrust16_6_AdmissionRisesOnlyToAHeldRelease: a joined member's leaf
// records 99.0.0, and a token allowed only upgrade:RecordRelease records
// 99.0.0 for every joined node and the founder: the admission release
// does not move (second build: 99.0.0, and every joiner 409). It rises by
// itself only to a release imported on the founder that every joined
// member reports.
func TestTrust16_6_AdmissionRisesOnlyToAHeldRelease(t *testing.T) {
	for _, be := range storeBackends {
		t.Run(be.name, func(t *testing.T) {
			f := trustFounderOn(t, "0.2.0", be.dsn(t))
			a := joined(t, f, "0.2.0", "192.0.2.61")

			a.record(t, "99.0.0").want(t, 204, "")
			if got := admission(t, f); got != "0.2.0" {
				t.Fatalf("after a member's leaf recorded 99.0.0 the admission release is %s, want 0.2.0", got)
			}
			var tok struct{ Token string }
			f.Operator(t).Must(t, "POST", "/v1/iam/tokens", map[string]any{"name": "recorder", "ttl": "1h", "policy": json.RawMessage(`{"version":"2026-01-01","statement":[{"effect":"allow","action":["upgrade:RecordRelease"],"resource":["*"]}]}`)}, 201, &tok)
			var members struct{ Members []struct{ NodeID string } }
			f.Operator(t).Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
			for _, m := range members.Members {
				send(t, f.Client, "PUT", "https://"+f.API+"/v1/cluster/nodes/"+m.NodeID+"/release", tok.Token, releaseRecord("99.0.0")).want(t, 204, "")
			}
			if got := admission(t, f); got != "0.2.0" {
				t.Fatalf("after a recorder token recorded 99.0.0 for every node the admission release is %s, want 0.2.0", got)
			}
			_, reg := register(t, f, joinToken(t, f, 1), "0.2.0", "192.0.2.62")
			reg.want(t, 201, "")

			// Imported on the founder and reported by every joined member:
			// the admission release follows by itself, to that release.
			tree := stratumtest.SignedReleaseTree(t, "0.3.0", nil, 1024)
			tree.TrustOn(t, f)
			f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": tree.Dir}, 201, nil)
			if got := admission(t, f); got != "0.2.0" {
				t.Fatalf("the import alone moved the admission release to %s", got)
			}
			a.record(t, "0.3.0").want(t, 204, "")
			if got := admission(t, f); got != "0.3.0" {
				t.Fatalf("every joined member reports the held 0.3.0: admission %s, want 0.3.0", got)
			}
		})
	}
}

// TestTrust16_8_NoDowngradeByBuildMetadata: a founder (an impostor with a
// founder certificate) offers 0.3.0+old, signed by a trusted key, to a
// 0.3.0 joiner, naming the registration's release 0.3.0 or another: the
// joiner refuses (exit 4), fetches nothing and runs no hook (second
// build: the hook ran). The real founder does not offer a release whose
// signed upgradesFrom leaves out the joiner's release.
func TestTrust16_8_NoDowngradeByBuildMetadata(t *testing.T) {
	work := t.TempDir()
	rk := stratumtest.NewReleaseKey(t, filepath.Join(work, "keys"))
	pub := rk.CopyPub(t, filepath.Join(work, "pub"))
	tree := filepath.Join(work, "tree")
	os.MkdirAll(filepath.Join(tree, "sysext"), 0o755)
	os.WriteFile(filepath.Join(tree, "sysext", "x.raw"), []byte("sysext image"), 0o644)
	mustRun(t, "release", "sign", "--key", rk.Key, "--release", "0.3.0+old", tree)
	for _, from := range []string{"0.3.0", "0.2.9"} {
		ff := impostor(t, map[string]string{"from": from, "to": "0.3.0+old"}, tree)
		code, out, hookRan := joinAgainst(t, ff, "0.3.0", pub)
		if code != 4 || hookRan || !strings.Contains(out, "refusing the upgrade to 0.3.0+old") {
			t.Errorf("offer %s -> 0.3.0+old to a 0.3.0 joiner: exit %d, hook ran %v:\n%s", from, code, hookRan, out)
		}
		if got := ff.Requested("sysext/"); len(got) != 0 {
			t.Errorf("offer %s -> 0.3.0+old: the joiner fetched %v", from, got)
		}
	}

	for _, be := range storeBackends {
		t.Run(be.name, func(t *testing.T) {
			f := trustFounderOn(t, "0.3.0", be.dsn(t))
			rel := stratumtest.SignedReleaseTree(t, "0.3.0", []string{"0.1.0"}, 1024)
			rel.TrustOn(t, f)
			f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": rel.Dir}, 201, nil)
			register := func(joinerRelease, mgmt string) answer {
				j := selfSignedClient(t, f.Pool, 0)
				return send(t, j, "POST", "https://"+f.Join+"/v1/join/registrations", "", map[string]any{"token": joinToken(t, f, 1), "release": joinerRelease, "selfUpgrade": true, "hostname": "lab-" + strings.ReplaceAll(mgmt, ".", "-"), "mgmtIp": mgmt})
			}
			a := register("0.2.0", "192.0.2.81").want(t, 409, "RELEASE_MISMATCH")
			var e struct{ Details struct{ Reason string } }
			_ = json.Unmarshal(a.raw, &e)
			if e.Details.Reason != "not an upgrade from the joiner's release" {
				t.Errorf("a 0.2.0 joiner offered a 0.3.0 that upgrades only from 0.1.0: %s", a.raw)
			}
			b := register("0.1.0", "192.0.2.82").want(t, 201, "")
			if !strings.Contains(string(b.raw), `"needs-upgrade"`) {
				t.Errorf("a 0.1.0 joiner: %s, want needs-upgrade", b.raw)
			}
		})
	}
}

// TestTrust16_9_FairReleaseSlots: two registrations hold the founder's 4
// release slots with 2 stalled reads each; a third waits (503
// RELEASE_BUSY, Retry-After 1: first in line) and a fourth is second in
// line (Retry-After 2). When one of the first registration's reads ends,
// its second read is refused while the others wait, the second in line
// is refused, and the first in line gets the slot (second build: the
// holders took every freed slot again and the third waited forever).
func TestTrust16_9_FairReleaseSlots(t *testing.T) {
	f := trustFounder(t, "0.2.0", "--release-concurrency", "4")
	tree := stratumtest.SignedReleaseTree(t, "0.2.0", nil, 32<<20)
	tree.TrustOn(t, f)
	f.Operator(t).Must(t, "POST", "/v1/admin/releases", map[string]any{"path": tree.Dir}, 201, nil)
	token := joinToken(t, f, 4)
	type reg struct {
		c   *http.Client
		url string
	}
	register := func(mgmt string) reg {
		c := selfSignedClient(t, f.Pool, 64<<10) // a reader that stops reading stalls the founder's writes
		a := send(t, c, "POST", "https://"+f.Join+"/v1/join/registrations", "", map[string]any{"token": token, "release": "0.1.0", "selfUpgrade": true, "hostname": "lab-" + strings.ReplaceAll(mgmt, ".", "-"), "mgmtIp": mgmt}).want(t, 201, "")
		var v struct{ JoinID, State string }
		_ = json.Unmarshal(a.raw, &v)
		if v.State != "needs-upgrade" {
			t.Fatalf("registration %s: %s", mgmt, a.raw)
		}
		return reg{c, "https://" + f.Join + "/v1/join/registrations/" + v.JoinID + "/release/" + tree.Blob}
	}
	get := func(r reg) *http.Response {
		t.Helper()
		resp, err := r.c.Get(r.url)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
		}
		return resp
	}
	busy := func(who string, resp *http.Response, retryAfter string) {
		t.Helper()
		if resp.StatusCode != 503 || (retryAfter != "" && resp.Header.Get("Retry-After") != retryAfter) {
			t.Fatalf("%s: %d Retry-After %q, want 503 RELEASE_BUSY with Retry-After %s", who, resp.StatusCode, resp.Header.Get("Retry-After"), retryAfter)
		}
	}
	a, b, c, d := register("192.0.2.91"), register("192.0.2.92"), register("192.0.2.93"), register("192.0.2.94")
	var held []*http.Response
	for _, r := range []reg{a, a, b, b} {
		resp := get(r)
		if resp.StatusCode != 200 {
			t.Fatalf("a holder's read: %d", resp.StatusCode)
		}
		held = append(held, resp)
	}
	t.Cleanup(func() {
		for _, r := range held {
			r.Body.Close()
		}
	})
	busy("the third registration", get(c), "1")
	busy("the fourth registration", get(d), "2")

	held[0].Body.Close() // one of a's reads ends: a slot comes free
	time.Sleep(time.Second)
	busy("the first registration's second read while others wait", get(a), "")
	busy("the second in line", get(d), "2")
	resp := get(c)
	if resp.StatusCode != 200 {
		t.Fatalf("the first in line after a slot came free: %d, want 200", resp.StatusCode)
	}
	held = append(held, resp)
}

// TestTrust16_10_SmallerEdges: refused management addresses written in
// IPv4-mapped, IPv4-compatible and NAT64 forms are refused like their
// IPv4 address (second build: 201, a leaf with that SAN after approval),
// and a key twice inside facts is refused like any other duplicate.
func TestTrust16_10_SmallerEdges(t *testing.T) {
	f := trustFounder(t, "0.2.0")
	token := joinToken(t, f, 1)
	for _, ip := range []string{
		"::ffff:192.0.2.200", "::c000:2c8", "64:ff9b::c000:2c8", // the API VIP
		"::7f00:1", "64:ff9b::7f00:1", // loopback
		"::ffff:169.254.1.1", "64:ff9b::a9fe:101", // link-local
		"::e000:1", "64:ff9b::e000:1", // multicast
		"64:ff9b::ffff:ffff", "64:ff9b::", // broadcast, unspecified
	} {
		_, a := register(t, f, token, "0.2.0", ip)
		if a.status != 400 || a.err.Code != "INVALID_INPUT" || !a.fieldNamed("mgmtIp") {
			t.Errorf("mgmtIp %s at registration: %d %s", ip, a.status, a.raw)
		}
	}
	j := selfSignedClient(t, f.Pool, 0)
	body := `{"token":"` + token + `","release":"0.2.0","hostname":"lab-dup","mgmtIp":"192.0.2.71","facts":{"os":{"id":"debian","id":"fedora"}}}`
	req, _ := http.NewRequest("POST", "https://"+f.Join+"/v1/join/registrations", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := j.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Code   string
		Fields []struct{ Field string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || len(e.Fields) != 1 || e.Fields[0].Field != "facts.os.id" {
		t.Errorf("a duplicate key inside facts: %d %+v, want 400 naming facts.os.id", resp.StatusCode, e)
	}
	var tokens struct{ Tokens []struct{ UsesLeft int } }
	f.Operator(t).Must(t, "GET", "/v1/admin/join/tokens", nil, 200, &tokens)
	if len(tokens.Tokens) != 1 || tokens.Tokens[0].UsesLeft != 1 {
		t.Fatalf("refused registrations spent the token: %+v", tokens)
	}
}
