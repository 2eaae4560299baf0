package abuse

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	mib             = 1 << 20
	oversizeSource  = "127.0.0.5"
	maxHeaderBytes  = 64 << 10
	netHTTPHdrSlack = 4096 // net/http reads MaxHeaderBytes + 4096 before it answers 431
)

// padded is a JSON object of exactly n bytes (n >= len(obj)).
func padded(obj string, n int) []byte {
	return append([]byte(obj), bytes.Repeat([]byte(" "), n-len(obj))...)
}

func limitScenarios() []scenario {
	return []scenario{
		{
			name:   "oversized bodies",
			expect: "413 PAYLOAD_TOO_LARGE (JSON, X-Request-Id) over 1 MiB (4 MiB for a release record), with Content-Length or chunked, a 10 GiB Content-Length from the header alone; at the limit the body is decoded (not 413); no state change",
			run: func(t *testing.T, e *env, c *tally) {
				over := bytes.Repeat([]byte("A"), mib+1)
				overRecord := bytes.Repeat([]byte("A"), 4*mib+1)
				auth := "Authorization: Bearer " + e.admin + "\r\n"
				type bc struct {
					name    string
					addr    string
					cert    *tls.Certificate
					source  string
					method  string
					path    string
					hdr     string
					body    []byte
					chunked bool
					status  int
					code    string
				}
				j, a, k3, leafA := e.f.Join, e.f.API, &e.k3.cert, &e.leafA
				cases := []bc{
					{"register, 1 MiB + 1", j, k3, "", "POST", "/v1/join/registrations", "", over, false, 413, "PAYLOAD_TOO_LARGE"},
					{"register, 1 MiB + 1 chunked", j, k3, "", "POST", "/v1/join/registrations", "", over, true, 413, "PAYLOAD_TOO_LARGE"},
					{"register, 16 MiB chunked", j, k3, "", "POST", "/v1/join/registrations", "", bytes.Repeat([]byte("{"), 16*mib), true, 413, "PAYLOAD_TOO_LARGE"},
					{"register, exactly 1 MiB (decoded: the token is refused)", j, k3, "", "POST", "/v1/join/registrations", "",
						padded(`{"token":"sjt1.jt-zzzzzzzzzz.x","release":"0.2.0","hostname":"exactly-1mib"}`, mib), false, 401, "JOIN_TOKEN_INVALID"},
					{"progress, 1 MiB + 1", j, k3, "", "POST", "/v1/join/registrations/" + e.r1 + "/progress", "", over, false, 413, "PAYLOAD_TOO_LARGE"},
					{"API token, 1 MiB + 1", a, nil, "", "POST", "/v1/iam/tokens", auth, over, false, 413, "PAYLOAD_TOO_LARGE"},
					{"join token, 1 MiB + 1 chunked", a, nil, "", "POST", "/v1/admin/join/tokens", auth, over, true, 413, "PAYLOAD_TOO_LARGE"},
					{"approve, 1 MiB + 1", a, nil, "", "POST", "/v1/admin/join/registrations/" + e.p1 + "/approve", auth, over, false, 413, "PAYLOAD_TOO_LARGE"},
					{"reject, 1 MiB + 1 chunked", a, nil, "", "POST", "/v1/admin/join/registrations/" + e.p1 + "/reject", auth, over, true, 413, "PAYLOAD_TOO_LARGE"},
					{"release import, 1 MiB + 1", a, nil, "", "POST", "/v1/admin/releases", auth, over, false, 413, "PAYLOAD_TOO_LARGE"},
					{"release record, 4 MiB + 1", a, nil, "", "PUT", "/v1/cluster/nodes/" + e.nodeB + "/release", auth, overRecord, false, 413, "PAYLOAD_TOO_LARGE"},
					{"release record, 4 MiB + 1 chunked", a, nil, "", "PUT", "/v1/cluster/nodes/" + e.nodeB + "/release", auth, overRecord, true, 413, "PAYLOAD_TOO_LARGE"},
					{"release record, 2 MiB (under its limit: decoded)", a, nil, "", "PUT", "/v1/cluster/nodes/" + e.nodeB + "/release", auth, bytes.Repeat([]byte("A"), 2*mib), false, 400, "INVALID_INPUT"},
					{"applied, 1 MiB + 1 with A's leaf", a, leafA, "", "PUT", "/v1/cluster/members/" + e.nodeA + "/applied", "", over, false, 413, "PAYLOAD_TOO_LARGE"},
					{"login, 1 MiB + 1", a, nil, oversizeSource, "POST", "/v1/auth/login", "", over, false, 413, "PAYLOAD_TOO_LARGE"},
					{"register, Content-Length 10 GiB, 1 byte sent", j, k3, "", "POST", "/v1/join/registrations", "Content-Length: 10737418240\r\n", []byte("{"), false, 413, "PAYLOAD_TOO_LARGE"},
					{"API token, Content-Length 10 GiB, 1 byte sent", a, nil, "", "POST", "/v1/iam/tokens", auth + "Content-Length: 10737418240\r\n", []byte("{"), false, 413, "PAYLOAD_TOO_LARGE"},
				}
				for _, bcase := range cases {
					var req bytes.Buffer
					fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n%s", bcase.method, bcase.path, bcase.hdr)
					switch {
					case bcase.chunked:
						req.WriteString("Transfer-Encoding: chunked\r\n\r\n")
						for b := bcase.body; len(b) > 0; {
							n := min(len(b), 64<<10)
							fmt.Fprintf(&req, "%x\r\n%s\r\n", n, b[:n])
							b = b[n:]
						}
						req.WriteString("0\r\n\r\n")
					case strings.Contains(bcase.hdr, "Content-Length"):
						req.WriteString("\r\n")
						req.Write(bcase.body)
					default:
						fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n", len(bcase.body))
						req.Write(bcase.body)
					}
					ans := e.rawFrom(bcase.source, bcase.addr, bcase.cert, req.Bytes(), bcase.method, 30*time.Second)
					ok := ans.is(bcase.status, bcase.code) && ans.elapsed < 10*time.Second+loadSlack() && ans.header.Get("X-Request-Id") != ""
					c.check(ok, "%s: %v; want %d %s", bcase.name, ans, bcase.status, bcase.code)
					c.note("%-55s -> %d %s in %v", bcase.name, ans.status, ans.apiErr().Code, ans.elapsed.Round(time.Millisecond))
				}
				c.check(e.joinerState(t, e.kp, e.p1) == "pending", "p1 after oversized approve/reject: %s", e.joinerState(t, e.kp, e.p1))
			},
		},
		{
			name:   "oversized headers",
			expect: fmt.Sprintf("431 over the header limit (%d KiB, plus net/http's 4 KiB read slack) on both listeners, within 10 s; 60 KiB and 64 KiB + 1 served", maxHeaderBytes>>10),
			run: func(t *testing.T, e *env, c *tally) {
				type hc struct {
					name   string
					addr   string
					head   string
					status int
				}
				big := func(n int) string { return "X-Big: " + strings.Repeat("a", n) + "\r\n" }
				many := func(count, size int) string {
					var b strings.Builder
					for i := range count {
						fmt.Fprintf(&b, "X-H%d: %s\r\n", i, strings.Repeat("b", size))
					}
					return b.String()
				}
				get := "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
				cases := []hc{
					{"60 KiB header (admin)", e.f.API, get + big(60<<10), 200},
					{"60 KiB header (join)", e.f.Join, get + big(60<<10), 200},
					{"64 KiB + 1 header (within net/http's slack)", e.f.API, get + big(maxHeaderBytes+1-len(get)-9), 200},
					{"72 KiB header (admin)", e.f.API, get + big(maxHeaderBytes+netHTTPHdrSlack+4<<10), 431},
					{"72 KiB header (join)", e.f.Join, get + big(maxHeaderBytes+netHTTPHdrSlack+4<<10), 431},
					{"80 KiB header (admin)", e.f.API, get + big(80<<10), 431},
					{"1 MiB header (admin)", e.f.API, get + big(mib), 431},
					{"1 MiB header (join)", e.f.Join, get + big(mib), 431},
					{"2,000 headers of 40 bytes (admin)", e.f.API, get + many(2000, 40), 431},
					{"10,000 tiny headers (join)", e.f.Join, get + many(10000, 1), 431},
					{"80 KiB request line (admin)", e.f.API, "GET /healthz?" + strings.Repeat("q", 80<<10) + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", 431},
				}
				for _, hcase := range cases {
					a := e.rawExchange(hcase.addr, e.certFor(hcase.addr), []byte(hcase.head+"\r\n"), "GET", 15*time.Second)
					c.check(a.err == nil && a.status == hcase.status && a.elapsed < 10*time.Second+loadSlack(), "%s: %v; want %d", hcase.name, a, hcase.status)
					c.note("%-45s -> %d (%s) in %v", hcase.name, a.status, a.header.Get("Content-Type"), a.elapsed.Round(time.Millisecond))
				}
			},
		},
	}
}

// certFor is the certificate a raw client presents: a joiner's key on the
// join listener, none on the admin API (which takes only CA-issued ones).
func (e *env) certFor(addr string) *tls.Certificate {
	if addr == e.f.Join {
		return &e.k3.cert
	}
	return nil
}
