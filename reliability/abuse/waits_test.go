package abuse

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitCase is one long-poll query against p1 or p2 (pending, left alone
// by every other scenario) and the answer it must get.
type waitCase struct {
	query    string
	status   int
	code     string
	min, max time.Duration
	onP2     bool // asked of p2: one registration holds at most 4 long-polls
}

// holdMargin is what a loaded runner (other test binaries and fuzzers
// sharing two CPUs) adds to an answer on top of the hold itself.
const holdMargin = 4 * time.Second

// heldFor is the hold a wait of s seconds gets: s, plus 0-5 % jitter, plus
// the margin of a loaded runner.
func heldFor(s int) (time.Duration, time.Duration) {
	d := time.Duration(s) * time.Second
	return d, d + d/20 + holdMargin + loadSlack()
}

func waitScenarios() []scenario {
	quick := 3*time.Second + loadSlack()
	bad := func(q string) waitCase { return waitCase{q, 400, "INVALID_INPUT", 0, quick, false} }
	now := func(q string) waitCase { return waitCase{q, 200, "", 0, quick, false} }
	holds := 0
	hold := func(q string, s int) waitCase {
		lo, hi := heldFor(s)
		holds++
		return waitCase{q, 200, "", lo, hi, holds > 4}
	}
	cases := []waitCase{
		bad("wait=-1&state=pending"),
		bad("wait=abc&state=pending"),
		bad("wait=&state=pending"),
		bad("wait=1.5&state=pending"),
		bad("wait=%2B1&state=pending"),
		bad("wait=1e3&state=pending"),
		bad("wait=0x10&state=pending"),
		bad("wait=%201&state=pending"),
		bad("wait=-0&state=pending"),
		now("wait=0&state=pending"),
		now("wait=000&state=pending"),
		now("wait=0000&state=pending"),
		now("state=pending"),
		now("wait=30"),
		now("wait=30&state=approved"),
		now("wait=99999999999999999999&state=needs-upgrade"),
		hold("wait=2&state=pending", 2),
		hold("wait=0002&state=pending", 2),
		hold("wait=060&state=pending", 60),
		hold("wait=60&state=pending", 60),
		hold("wait=61&state=pending", 60),
		hold("wait=99999999999999999999&state=pending", 60),
		hold("wait=9223372036854775808&state=pending", 60),
	}
	return []scenario{
		{
			name:   fmt.Sprintf("wait values at every edge (%d queries at once)", len(cases)),
			expect: fmt.Sprintf("negative/non-numeric/fraction/sign/exponent/hex/space: 400 INVALID_INPUT naming wait, within %v; 0 (any number of zeros), no state or another state: 200 within %v; S (leading zeros too): 200 after S s (+0-5 %% +%v); above 60 (any length): 200 after 60 s (+0-5 %% +%v)", quick, quick, holdMargin+loadSlack(), holdMargin+loadSlack()),
			run: func(t *testing.T, e *env, c *tally) {
				out := make([]answer, len(cases))
				var wg sync.WaitGroup
				for i, wc := range cases {
					wg.Add(1)
					go func() {
						defer wg.Done()
						k, id := e.kp, e.p1
						if wc.onP2 {
							k, id = e.kp2, e.p2
						}
						out[i] = do(e.joiner(k), "GET", e.joinURL("/v1/join/registrations/"+id+"?"+wc.query), nil, nil)
					}()
				}
				wg.Wait()
				for i, wc := range cases {
					a := out[i]
					ok := a.is(wc.status, wc.code) && a.elapsed >= wc.min && a.elapsed <= wc.max
					if ok && wc.code == "INVALID_INPUT" {
						ok = hasField(a, "wait")
					}
					c.check(ok, "%s: %v; want %d %s in %v..%v", wc.query, a, wc.status, wc.code, wc.min, wc.max)
					c.note("%-45s -> %d in %v", wc.query, a.status, a.elapsed.Round(10*time.Millisecond))
				}
			},
		},
	}
}

// herdScenarios: many long-polls on one registration at once.
func herdScenarios() []scenario {
	herd := scale(100, 1000)
	// The herd fires while other groups run their own bursts on two
	// shared CPUs: its upper bound says "none hangs", not "on time".
	const herdMargin = 10 * time.Second
	return []scenario{
		{
			name:   fmt.Sprintf("%d long-polls at once (wait=3) on established connections, one registration", herd),
			expect: fmt.Sprintf("at most 4 held (SPEC 10.10), each 200 after 3 s (+0-5 %%) and none later than %v; every other one 429 TOO_MANY_REQUESTS with Retry-After at once (none hangs; the waiter gauge is checked at the end, when no other long-poll runs)", 3*time.Second+150*time.Millisecond+herdMargin+loadSlack()),
			run: func(t *testing.T, e *env, c *tally) {
				target := "/v1/join/registrations/" + e.ph + "?wait=3&state=pending"
				conns := e.prepConns(t, herd, liveOpts{addr: e.f.Join, cert: same(&e.kh.cert)})
				out := burst(conns, func(_ int, lc *liveConn) answer { return lc.exchange("GET", target, "", nil) })
				lo, hi := time.Duration(1<<62), time.Duration(0)
				held := 0
				for _, a := range out {
					if a.is(429, "TOO_MANY_REQUESTS") {
						c.check(a.header.Get("Retry-After") != "" && a.elapsed < herdMargin+loadSlack(), "wait=3 refused: %v", a)
						continue
					}
					held++
					c.check(a.is(200, "") && a.elapsed >= 3*time.Second && a.elapsed <= 3*time.Second+150*time.Millisecond+herdMargin+loadSlack(), "wait=3: %v", a)
					lo, hi = min(lo, a.elapsed), max(hi, a.elapsed)
				}
				c.check(held <= 4, "%d long-polls held on one registration (SPEC 10.10: at most 4)", held)
				c.note("answered after %v..%v", lo.Round(time.Millisecond), hi.Round(time.Millisecond))
			},
		},
	}
}

// hasField reports whether an INVALID_INPUT answer names field.
func hasField(a answer, field string) bool {
	for _, f := range a.apiErr().Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}
