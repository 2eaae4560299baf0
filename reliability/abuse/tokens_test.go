package abuse

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// registerWith registers a fresh key with token on the cluster release.
func (e *env) registerWith(t *testing.T, token, name string) answer {
	k := newKey(t, name)
	a := do(e.joiner(k), "POST", e.joinURL("/v1/join/registrations"), nil, map[string]any{"token": token, "release": clusterRelease, "hostname": name})
	if a.status == 201 {
		e.tokenRegs.Add(1)
	}
	return a
}

type tokenView struct {
	TokenID  string `json:"tokenId"`
	State    string `json:"state"`
	UsesLeft int    `json:"usesLeft"`
}

func (e *env) tokenState(t *testing.T, id string) tokenView {
	t.Helper()
	var list struct{ Tokens []tokenView }
	e.mustJSON(t, do(e.plain, "GET", e.apiURL("/v1/admin/join/tokens"), e.bearer(), nil), 200, &list)
	for _, tk := range list.Tokens {
		if tk.TokenID == id {
			return tk
		}
	}
	return tokenView{}
}

func (e *env) createToken(t *testing.T, body map[string]any) (token, id string) {
	t.Helper()
	var out struct{ Token, TokenID string }
	e.mustJSON(t, do(e.plain, "POST", e.apiURL("/v1/admin/join/tokens"), e.bearer(), body), 201, &out)
	return out.Token, out.TokenID
}

func tokenScenarios() []scenario {
	race1, raceN, usesN := scale(20, 100), scale(40, 200), 5
	return []scenario{
		{
			name:   "dead and forged join tokens",
			expect: "401 JOIN_TOKEN_INVALID for expired (ttl 1s), revoked, used-up, unknown, wrong-secret, malformed; one message for unknown and wrong secret; a token over 512 characters 400 INVALID_INPUT naming token; no registration created, no use spent",
			run: func(t *testing.T, e *env, c *tally) {
				expired, _ := e.createToken(t, map[string]any{"role": "worker", "ttl": "1s"})
				revoked, revokedID := e.createToken(t, map[string]any{"role": "worker"})
				if a := do(e.plain, "DELETE", e.apiURL("/v1/admin/join/tokens/"+revokedID), e.bearer(), nil); a.status != 204 {
					t.Fatalf("revoke: %v", a)
				}
				used, _ := e.createToken(t, map[string]any{"role": "worker", "uses": 1})
				first := e.registerWith(t, used, "uses-it")
				c.check(first.is(201, ""), "the one use of a token: %v", first)
				live, liveID := e.createToken(t, map[string]any{"role": "worker", "uses": 2})
				parts := strings.Split(live, ".")
				time.Sleep(1500 * time.Millisecond) // the 1s token expires
				cases := []struct{ name, token string }{
					{"expired", expired},
					{"revoked", revoked},
					{"used up", used},
					{"unknown id", "sjt1.jt-" + strings.Repeat("z", 10) + "." + parts[2]},
					{"wrong secret of a live token", parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))},
					{"secret of a live token with one byte changed", live[:len(live)-1] + string("AB"[boolInt(live[len(live)-1] == 'A')])},
					{"no secret", parts[0] + "." + parts[1] + "."},
					{"no id", parts[0] + ".." + parts[2]},
					{"two dots more", live + ".."},
					{"another prefix", "sjt2." + parts[1] + "." + parts[2]},
					{"garbage", "hunter2"},
					{"unicode", "sjt1.jt-ü." + parts[2]},
					{"512 characters", strings.Repeat("a", 512)},
				}
				messages := map[string]string{}
				for _, tc := range cases {
					a := e.registerWith(t, tc.token, "dead-"+strings.ReplaceAll(tc.name, " ", "-"))
					c.check(a.is(401, "JOIN_TOKEN_INVALID"), "%s token: %v", tc.name, a)
					messages[tc.name] = a.apiErr().Message
				}
				c.check(messages["unknown id"] == messages["wrong secret of a live token"], "unknown id and wrong secret answer differently: %q vs %q", messages["unknown id"], messages["wrong secret of a live token"])
				c.note("messages: unknown id %q; expired %q; revoked %q; used up %q", messages["unknown id"], messages["expired"], messages["revoked"], messages["used up"])
				a := e.registerWith(t, strings.Repeat("a", 513), "too-long")
				c.check(a.is(400, "INVALID_INPUT") && hasField(a, "token"), "a 513-character token: %v", a)
				st := e.tokenState(t, liveID)
				c.check(st.State == "active" && st.UsesLeft == 2, "the live token after forged secrets: %+v", st)
				// The same key comes back while its registration is open: 200,
				// the used-up token is not needed again (SPEC 4.2).
				k := newKey(t, "returns")
				tok, _ := e.createToken(t, map[string]any{"role": "worker", "uses": 1})
				a1 := do(e.joiner(k), "POST", e.joinURL("/v1/join/registrations"), nil, map[string]any{"token": tok, "release": clusterRelease, "hostname": "returns"})
				if a1.status == 201 {
					e.tokenRegs.Add(1)
				}
				a2 := do(e.joiner(k), "POST", e.joinURL("/v1/join/registrations"), nil, map[string]any{"token": tok, "release": clusterRelease, "hostname": "returns"})
				var v1, v2 struct{ JoinID string }
				_ = json.Unmarshal(a1.body, &v1)
				_ = json.Unmarshal(a2.body, &v2)
				c.check(a1.is(201, "") && a2.is(200, "") && v1.JoinID == v2.JoinID, "the same key re-registering with its used-up token: %v then %v", a1, a2)
			},
		},
		{
			name:   fmt.Sprintf("one token, %d keys at once (uses 1) and %d keys at once (uses %d), on established connections", race1, raceN, usesN),
			expect: "exactly 1 (then exactly 5) x 201; every other one 401 JOIN_TOKEN_INVALID; usesLeft 0",
			run: func(t *testing.T, e *env, c *tally) {
				for _, r := range []struct{ keys, uses int }{{race1, 1}, {raceN, usesN}} {
					tok, id := e.createToken(t, map[string]any{"role": "worker", "uses": r.uses})
					keys := make([]key, r.keys)
					for i := range keys {
						keys[i] = newKey(t, fmt.Sprintf("race-%d-%d", r.uses, i))
					}
					conns := e.prepConns(t, r.keys, liveOpts{addr: e.f.Join, cert: func(i int) *tls.Certificate { return &keys[i].cert }})
					out := burst(conns, func(i int, lc *liveConn) answer {
						body, _ := json.Marshal(map[string]any{"token": tok, "release": clusterRelease, "hostname": keys[i].name})
						return lc.exchange("POST", "/v1/join/registrations", "", body)
					})
					for _, a := range out {
						if a.status == 201 {
							e.tokenRegs.Add(1)
						}
					}
					won := 0
					for _, a := range out {
						if a.status == 201 {
							won++
							continue
						}
						c.check(a.is(401, "JOIN_TOKEN_INVALID"), "a racing registration: %v", a)
					}
					c.check(won == r.uses, "%d registrations won a token of %d uses", won, r.uses)
					st := e.tokenState(t, id)
					c.check(st.UsesLeft == 0 && st.State == "used-up", "the raced token: %+v", st)
					c.note("uses %d, %d keys: %d won", r.uses, r.keys, won)
				}
			},
		},
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
