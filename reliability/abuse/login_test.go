package abuse

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// Each brute force comes from its own loopback source address, so the
// limiter's count for 127.0.0.1 (the suite's admin session) is untouched.
const (
	bruteSource       = "127.0.0.2"
	bruteHerdSource   = "127.0.0.3"
	innocentSource    = "127.0.0.4"
	loginBurst        = 5
	retryAfterCeiling = 60
)

func (e *env) login(source, email, password string, hdr map[string]string) answer {
	return do(e.client(clientOpts{local: source}), "POST", e.apiURL("/v1/auth/login"), hdr, map[string]string{"email": email, "password": password})
}

func retryAfterOK(a answer) bool {
	n, err := strconv.Atoi(a.header.Get("Retry-After"))
	return err == nil && n >= 1 && n <= retryAfterCeiling
}

func loginScenarios() []scenario {
	herd := scale(30, 200)
	return []scenario{
		{
			name:   "login brute force from one source",
			expect: "5 wrong passwords 401 UNAUTHENTICATED, then 429 TOO_MANY_REQUESTS with Retry-After 1..60, the right password too, X-Forwarded-For ignored; another source still logs in",
			run: func(t *testing.T, e *env, c *tally) {
				for i := range loginBurst {
					a := e.login(bruteSource, e.email, fmt.Sprintf("wrong-%d", i), nil)
					c.check(a.is(401, "UNAUTHENTICATED"), "wrong password %d: %v", i+1, a)
				}
				a := e.login(bruteSource, e.email, "wrong-6", nil)
				c.check(a.is(429, "TOO_MANY_REQUESTS") && retryAfterOK(a), "attempt 6: %v (Retry-After %q)", a, a.header.Get("Retry-After"))
				c.note("attempt 6: %d, Retry-After %s", a.status, a.header.Get("Retry-After"))
				a = e.login(bruteSource, e.email, e.pass, nil)
				c.check(a.is(429, "TOO_MANY_REQUESTS") && retryAfterOK(a), "the right password while limited: %v", a)
				a = e.login(bruteSource, e.email, e.pass, map[string]string{"X-Forwarded-For": "198.51.100.7", "X-Real-Ip": "198.51.100.7"})
				c.check(a.is(429, "TOO_MANY_REQUESTS"), "a forged X-Forwarded-For while limited: %v", a)
				a = e.login(bruteSource, "nobody@example.com", "x", nil)
				c.check(a.is(429, "TOO_MANY_REQUESTS"), "another email from the limited source: %v", a)
				a = e.login(innocentSource, e.email, e.pass, nil)
				c.check(a.is(200, ""), "the right password from another source: %v", a)
			},
		},
		{
			name:   fmt.Sprintf("%d concurrent wrong logins from one source, on established connections", herd),
			expect: "exactly 5 x 401 UNAUTHENTICATED (the burst), the rest 429 TOO_MANY_REQUESTS with Retry-After",
			run: func(t *testing.T, e *env, c *tally) {
				conns := e.prepConns(t, herd, liveOpts{addr: e.f.API, source: bruteHerdSource})
				out := burst(conns, func(i int, lc *liveConn) answer {
					body, _ := json.Marshal(map[string]string{"email": e.email, "password": fmt.Sprintf("guess-%d", i)})
					return lc.exchange("POST", "/v1/auth/login", "", body)
				})
				denied, limited := 0, 0
				for _, a := range out {
					switch {
					case a.is(401, "UNAUTHENTICATED"):
						denied++
					case a.is(429, "TOO_MANY_REQUESTS") && retryAfterOK(a):
						limited++
					default:
						c.check(false, "a concurrent wrong login: %v", a)
					}
				}
				c.check(denied == loginBurst, "%d wrong logins got past the limiter, want exactly %d", denied, loginBurst)
				c.check(limited == herd-loginBurst, "%d limited, want %d", limited, herd-loginBurst)
				c.note("%d x 401, %d x 429", denied, limited)
			},
		},
	}
}
