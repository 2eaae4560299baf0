package abuse

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func (e *env) releaseURL(joinID, path string) string {
	return e.joinURL("/v1/join/registrations/" + joinID + "/release/" + path)
}

// releaseScenarios share the founder's release semaphore, and the
// stampede counts its slots exactly: it runs alone, first. The slow
// download then holds one slot for its whole length while the others,
// which need one slot at a time, run beside it. No other group reads
// release files.
func releaseScenarios() []scenario {
	slow := slowDownload()
	slow.background = true
	return []scenario{
		stampede(),
		slow,
		ranges(),
		pathTricks(),
		symlinks(),
	}
}

// stampede: N concurrent reads of the large file by two registrations
// (half each), sent at once on N connections established beforehand (so
// the burst is one of requests, not of handshakes). The holders never
// read their bodies (a small SO_RCVBUF blocks the founder's write), so
// each registration is served its share of 2 (SPEC 10.8), together
// exactly --release-concurrency, and every other read is refused at once
// with RELEASE_BUSY.
func stampede() scenario {
	n := scale(200, 1000)
	return scenario{
		name:   fmt.Sprintf("%d concurrent release reads by two registrations", n),
		expect: fmt.Sprintf("exactly %d x 200 (%d per registration), the rest 503 RELEASE_BUSY with Retry-After 1..5, every answer within 30 s; HEAD still 200 while full; busy counter +%d; slots free again after", concurrency, perRegistration, n-concurrency+1),
		run: func(t *testing.T, e *env, c *tally) {
			targets := [2]string{"/v1/join/registrations/" + e.r1 + "/release/" + e.blob, "/v1/join/registrations/" + e.r2 + "/release/" + e.blob}
			url := e.joinURL(targets[0])
			certs := [2]*tls.Certificate{&e.k1.cert, &e.k2.cert}
			conns := e.prepConns(t, n, liveOpts{addr: e.f.Join, cert: func(i int) *tls.Certificate { return certs[i%2] }, rcvbuf: 16 << 10})
			busyBefore := e.metrics(t)["stratum_release_busy_total"]
			type res struct {
				status  int
				code    string
				retry   string
				elapsed time.Duration
				err     error
			}
			results := make([]res, n)
			var ready, answered, finished sync.WaitGroup
			ready.Add(n)
			answered.Add(n)
			finished.Add(n)
			fire, letGo := make(chan struct{}), make(chan struct{})
			for i, lc := range conns {
				go func() {
					defer finished.Done()
					ready.Done()
					<-fire
					_ = lc.c.SetDeadline(time.Now().Add(2 * time.Minute))
					start := time.Now()
					resp, err := lc.do("GET", targets[i%2], "", nil)
					if err != nil {
						results[i] = res{err: err, elapsed: time.Since(start)}
						answered.Done()
						return
					}
					r := res{status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), elapsed: time.Since(start)}
					if resp.StatusCode != 200 {
						b, _ := io.ReadAll(resp.Body)
						r.code = answer{body: b}.apiErr().Code
					}
					results[i] = r
					answered.Done()
					if resp.StatusCode == 200 {
						<-letGo // hold the slot: read nothing until every request is answered
					}
					lc.c.Close()
				}()
			}
			ready.Wait()
			close(fire)
			allAnswered := make(chan struct{})
			go func() { answered.Wait(); close(allAnswered) }()
			select {
			case <-allAnswered:
			case <-time.After(90 * time.Second):
				c.check(false, "not every release read was answered within 90 s: some hang")
			}
			// While every slot is held: HEAD needs no slot, GET is refused.
			head := do(e.joiner(e.k1), "HEAD", url, nil, nil)
			c.check(head.is(200, "") && head.header.Get("Content-Length") == strconv.Itoa(blobSize), "HEAD while every slot is held: %v", head)
			more := do(e.joiner(e.k1), "GET", url, nil, nil)
			c.check(more.is(503, "RELEASE_BUSY"), "one more GET while every slot is held: %v", more)
			close(letGo)
			finished.Wait()

			served, busy, slowest := 0, 0, time.Duration(0)
			var servedTo [2]int
			for i, r := range results {
				slowest = max(slowest, r.elapsed)
				switch {
				case r.err == nil && r.status == 200:
					served++
					servedTo[i%2]++
					c.check(r.elapsed < 30*time.Second, "a served read took %v to answer", r.elapsed)
				case r.err == nil && r.status == 503 && r.code == "RELEASE_BUSY":
					busy++
					ra, err := strconv.Atoi(r.retry)
					c.check(err == nil && ra >= 1 && ra <= 5 && r.elapsed < 30*time.Second, "RELEASE_BUSY with Retry-After %q after %v", r.retry, r.elapsed)
				default:
					c.check(false, "release read: status %d code %q err %v after %v", r.status, r.code, r.err, r.elapsed)
				}
			}
			c.check(served == concurrency, "%d reads served, want exactly %d", served, concurrency)
			c.check(servedTo[0] == perRegistration && servedTo[1] == perRegistration, "reads served per registration %v, want %d each", servedTo, perRegistration)
			c.note("%d served, %d RELEASE_BUSY, %d other; slowest answer %v", served, busy, n-served-busy, slowest.Round(time.Millisecond))
			busyAfter := e.metrics(t)["stratum_release_busy_total"]
			c.check(busyAfter-busyBefore == float64(n-concurrency+1), "stratum_release_busy_total grew by %v, want %d", busyAfter-busyBefore, n-concurrency+1)

			// The slots come back once the holders hang up.
			var again answer
			ok := waitUntil(15*time.Second, func() bool {
				again = do(e.joiner(e.k1), "GET", url, nil, nil)
				return again.is(200, "")
			})
			c.check(ok && sha256hex(again.body) == sha256hex(e.files[e.blob]), "a read after the stampede: %v", again)
			var inFlight float64
			ok = waitUntil(15*time.Second, func() bool { inFlight = e.metrics(t)["stratum_release_reads_in_flight"]; return inFlight == 0 })
			c.check(ok, "stratum_release_reads_in_flight = %v after the stampede", inFlight)
		},
	}
}

// quickRange bounds the first byte of any Range answer: the header costs
// at most two parsed specs, never a read (let alone a hash) per range. A
// per-range 1 MiB chunk check for 10,000 ranges would take minutes.
const quickRange = 10 * time.Second

// ranges: hostile Range headers on the large file.
func ranges() scenario {
	type rc struct {
		name   string
		hdr    map[string]string
		status []int // any of
		part   [2]int64
	}
	size := int64(blobSize)
	whole := [2]int64{0, size}
	many := func(spec string, n int) string {
		return "bytes=" + strings.TrimSuffix(strings.Repeat(spec+",", n), ",")
	}
	cases := []rc{
		{"10,000 ranges 0-0", map[string]string{"Range": many("0-0", 10000)}, []int{200}, whole},
		{"10,000 suffix ranges -1", map[string]string{"Range": many("-1", 10000)}, []int{200}, whole},
		{"10,000 open ranges 0-", map[string]string{"Range": many("0-", 10000)}, []int{200}, whole},
		{"5,001 ranges, the first satisfiable, the rest past the end", map[string]string{"Range": "bytes=0-9," + strings.TrimSuffix(strings.Repeat("99999999-,", 5000), ",")}, []int{200}, whole},
		{"10,000 ranges in 150 KiB of header", map[string]string{"Range": many("1000000-1000001", 10000)}, []int{431}, [2]int64{}},
		{"10,000 empty list elements", map[string]string{"Range": "bytes=" + strings.Repeat(",", 10000)}, []int{416, 200}, whole},
		{"single 0-0", map[string]string{"Range": "bytes=0-0"}, []int{206}, [2]int64{0, 1}},
		{"suffix -1", map[string]string{"Range": "bytes=-1"}, []int{206}, [2]int64{size - 1, size}},
		{"open 100-", map[string]string{"Range": "bytes=100-"}, []int{206}, [2]int64{100, size}},
		{"crossing a chunk boundary", map[string]string{"Range": "bytes=1048570-1048585"}, []int{206}, [2]int64{1048570, 1048586}},
		{"end past the file (saturates)", map[string]string{"Range": "bytes=0-99999999999999999999999"}, []int{206}, whole},
		{"start at the size", map[string]string{"Range": "bytes=" + strconv.FormatInt(size, 10) + "-"}, []int{416}, [2]int64{}},
		{"start beyond int64", map[string]string{"Range": "bytes=99999999999999999999999-"}, []int{416}, [2]int64{}},
		{"-0", map[string]string{"Range": "bytes=-0"}, []int{416}, [2]int64{}},
		{"inverted 5-1", map[string]string{"Range": "bytes=5-1"}, []int{416, 200}, whole},
		{"garbage", map[string]string{"Range": "bytes=a-b"}, []int{416, 200}, whole},
		{"negative start", map[string]string{"Range": "bytes=-5-10"}, []int{416, 200}, whole},
		{"other unit", map[string]string{"Range": "items=0-1"}, []int{200}, whole},
		{"If-Range another tag", map[string]string{"Range": "bytes=0-0", "If-Range": `"sha256:00"`}, []int{200}, whole},
	}
	return scenario{
		name:   fmt.Sprintf("hostile Range headers (%d)", len(cases)+3),
		expect: "many ranges: 200 with the whole file, first byte within " + (quickRange + loadSlack()).String() + "; one range: 206 with those bytes and Content-Range; unsatisfiable: 416 with Content-Range bytes */size; a header over 64 KiB: 431",
		run: func(t *testing.T, e *env, c *tally) {
			blob := e.files[e.blob]
			etag := `"sha256:` + sha256hex(blob) + `"`
			cases = append(cases,
				rc{"If-Range our ETag", map[string]string{"Range": "bytes=0-0", "If-Range": etag}, []int{206}, [2]int64{0, 1}},
				rc{"If-None-Match our ETag", map[string]string{"If-None-Match": etag}, []int{304}, [2]int64{}},
				rc{"If-None-Match a list of 5,000 tags", map[string]string{"If-None-Match": strings.Repeat(`"x", `, 5000) + etag}, []int{304}, [2]int64{}},
			)
			for _, rcase := range cases {
				a := do(e.joiner(e.k1), "GET", e.releaseURL(e.r1, e.blob), rcase.hdr, nil)
				ok := a.err == nil && a.ttfb < quickRange+loadSlack()
				statusOK := false
				for _, s := range rcase.status {
					statusOK = statusOK || a.status == s
				}
				ok = ok && statusOK
				switch {
				case !ok:
				case a.status == 200:
					ok = int64(len(a.body)) == size && bytes.Equal(a.body, blob)
				case a.status == 206:
					want := blob[rcase.part[0]:rcase.part[1]]
					ok = bytes.Equal(a.body, want) && a.header.Get("Content-Range") == fmt.Sprintf("bytes %d-%d/%d", rcase.part[0], rcase.part[1]-1, size)
				case a.status == 416:
					ok = a.header.Get("Content-Range") == fmt.Sprintf("bytes */%d", size) && a.apiErr().Code == "RANGE_NOT_SATISFIABLE"
				}
				c.check(ok, "%s: %d (%d body bytes, Content-Range %q), first byte after %v, err %v; want %v", rcase.name, a.status, len(a.body), a.header.Get("Content-Range"), a.ttfb, a.err, rcase.status)
				c.note("%-55s -> %d, first byte in %v, body in %v", rcase.name, a.status, a.ttfb.Round(time.Millisecond), a.elapsed.Round(time.Millisecond))
			}
		},
	}
}

// passwdMarker is in /etc/passwd on any Linux; no release file holds it.
const passwdMarker = "root:x:0:0"

// outsideBytes reports whether body carries bytes from outside the tree.
func outsideBytes(body []byte) bool {
	passwd, _ := os.ReadFile("/etc/passwd")
	return bytes.Contains(body, []byte(passwdMarker)) || (len(passwd) > 0 && bytes.Contains(body, passwd))
}

// pathTricks: release paths that try to leave the tree or dodge the
// manifest, written verbatim on the wire.
func pathTricks() scenario {
	type pc struct {
		target string // after .../release/
		status []int
	}
	nf := []int{404}
	cases := []pc{
		{"../../../../../../etc/passwd", nf},
		{"%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd", nf},
		{"%2E%2E%2F%2E%2E%2F%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", nf},
		{"..%2f..%2f..%2f..%2fetc%2fpasswd", nf},
		{"%252e%252e/%252e%252e/etc/passwd", nf},
		{"/etc/passwd", nf},
		{"%2fetc%2fpasswd", nf},
		{"%2Fproc%2Fself%2Fenviron", nf},
		{"payload/../../../../etc/passwd", nf},
		{"os/../payload/manifest.json", nf},
		{"./payload/manifest.json", nf},
		{"%2e/payload/manifest.json", nf},
		{"payload//manifest.json", nf},
		{"payload/./manifest.json", nf},
		{"payload/manifest.json/", nf},
		{"payload/manifest.json/.", nf},
		{"..\\..\\..\\..\\etc\\passwd", []int{404, 400}},
		{"..%5c..%5c..%5c..%5cetc%5cpasswd", nf},
		{"payload%5cmanifest.json", nf},
		{"payload/manifest.json%00", nf},
		{"payload/manifest.json%00.png", nf},
		{"%00", nf},
		{"payload/manifest.json\x00", []int{400}}, // a raw NUL: net/http refuses the request line
		{"", nf},
		{"os", nf},
		{"os/", nf},
		{"os/blobs/sha256", nf},
		{"PAYLOAD/MANIFEST.JSON", nf},
		{"payload/manifest.json;.txt", nf},
		{"payload/Manifest.json", nf},
		{"data.key", nf},
		{"../../data.key", nf},
		{"..%2f..%2fdata.key", nf},
		{"../../stratum.db", nf},
		{"../../bootstrap-credentials.txt", nf},
		{strings.Repeat("a/", 4000) + "x", nf},
	}
	return scenario{
		name:   fmt.Sprintf("path tricks in release paths (%d, raw on the wire)", len(cases)+13),
		expect: "404 NOT_FOUND for every path that is not a listed one, never bytes from outside the tree (a raw NUL: net/http's 400); the listed manifest: 200 with its bytes",
		run: func(t *testing.T, e *env, c *tally) {
			prefix := "/v1/join/registrations/" + e.r1 + "/release/"
			outside := map[string][]byte{}
			for _, name := range []string{"data.key", "stratum.db", "bootstrap-credentials.txt"} {
				b, _ := os.ReadFile(filepath.Join(e.f.Dir, name))
				outside[name] = b
			}
			for _, pcase := range cases {
				req := "GET " + prefix + pcase.target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
				a := e.rawExchange(e.f.Join, &e.k1.cert, []byte(req), "GET", 15*time.Second)
				ok := a.err == nil
				statusOK := false
				for _, s := range pcase.status {
					statusOK = statusOK || a.status == s
				}
				ok = ok && statusOK && !outsideBytes(a.body)
				if ok && a.status == 404 {
					ok = a.apiErr().Code == "NOT_FOUND"
				}
				for name, b := range outside {
					if len(b) > 16 && bytes.Contains(a.body, b[:16]) {
						ok = false
						t.Errorf("%q answered bytes of %s", pcase.target, name)
					}
				}
				c.check(ok, "%q: %v; want %v", clip(pcase.target, 60), a, pcase.status)
			}
			// The same tricks in the route before the release path.
			for _, target := range []string{
				"/v1/join/registrations/../release/payload/manifest.json",
				"/v1/join/registrations/%2e%2e/release/payload/manifest.json",
				"/v1/join/registrations/" + e.r1 + "%2f../release/payload/manifest.json",
				"/v1/join/registrations/..%2f" + e.r1 + "/release/payload/manifest.json",
				"/v1/join/registrations/" + e.r1 + "/./release/payload/manifest.json",
				"/v1/join/registrations/" + e.r1 + "/../" + e.r1 + "/release/payload/manifest.json",
				"/v1/join/registrations/" + e.r1 + "//release/payload/manifest.json",
				"//v1/join/registrations/" + e.r1 + "/release/payload/manifest.json",
				"/v1/join//registrations/" + e.r1 + "/release/payload/manifest.json",
				"https://localhost/v1/join/registrations/" + e.r1 + "/release/../../../../etc/passwd",
				"/v1/join/registrations/" + e.r1 + "/release/../../../../../../etc/passwd?x=payload/manifest.json",
			} {
				req := "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
				a := e.rawExchange(e.f.Join, &e.k1.cert, []byte(req), "GET", 15*time.Second)
				c.check(a.is(404, "NOT_FOUND") && !outsideBytes(a.body), "%q: %v", target, a)
			}
			// Controls: the listed manifest is served, byte for byte; a
			// registration that is not needs-upgrade reads nothing.
			req := "GET " + prefix + "payload/manifest.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
			a := e.rawExchange(e.f.Join, &e.k1.cert, []byte(req), "GET", 15*time.Second)
			c.check(a.is(200, "") && bytes.Equal(a.body, e.manifest), "the listed manifest: %v", a)
			a = do(e.joiner(e.kp), "GET", e.releaseURL(e.p1, "payload/manifest.json"), nil, nil)
			c.check(a.is(404, "NOT_FOUND"), "the manifest through a pending registration: %v", a)
		},
	}
}

// slowDownload: a joiner on a slow link reads the large file for longer
// than the server's ReadTimeout; the founder's timeouts are for slow
// requests, not slow downloads, so it gets every byte.
func slowDownload() scenario {
	const rate = 448 << 10 // bytes a second: 16 MiB in about 37 s
	return scenario{
		name:   "slow legitimate download outlives ReadTimeout",
		expect: fmt.Sprintf("200, all %d bytes, hash equal, though the read takes more than %v", blobSize, readTimeout),
		run: func(t *testing.T, e *env, c *tally) {
			client := e.client(clientOpts{cert: &e.k1.cert, rcvbuf: 64 << 10, timeout: -1})
			start := time.Now()
			resp, err := client.Get(e.releaseURL(e.r1, e.blob))
			if !c.check(err == nil && resp.StatusCode == 200, "slow download: %v %v", err, resp) {
				return
			}
			defer resp.Body.Close()
			var got bytes.Buffer
			buf := make([]byte, 64<<10)
			tick := time.NewTicker(time.Duration(float64(time.Second) * float64(len(buf)) / rate))
			defer tick.Stop()
			var rerr error
			for {
				<-tick.C
				n, err := io.ReadFull(resp.Body, buf)
				got.Write(buf[:n])
				if err != nil {
					if err != io.EOF && err != io.ErrUnexpectedEOF {
						rerr = err
					}
					break
				}
			}
			took := time.Since(start)
			c.note("%d bytes in %v", got.Len(), took.Round(time.Millisecond))
			c.check(rerr == nil && got.Len() == blobSize && sha256hex(got.Bytes()) == sha256hex(e.files[e.blob]) && took > readTimeout,
				"slow download: %d of %d bytes in %v, err %v", got.Len(), blobSize, took, rerr)
		},
	}
}

// symlinks: links planted in the imported (read-only) release tree that
// point outside it, at unlisted names and at listed ones. The founder
// never serves bytes from outside; a listed file that became a link is
// corrupt (503 RELEASE_CORRUPT) or absent (404).
func symlinks() scenario {
	return scenario{
		name:   "symlinks planted in the release tree",
		expect: "unlisted link names: 404; a listed file replaced by a link to /etc/passwd, a listed directory swapped for a link outside (same bytes there), a payload file linked outside: 503 RELEASE_CORRUPT or 404, never 200, never outside bytes; other files still served",
		run: func(t *testing.T, e *env, c *tally) {
			rel := e.relDir
			outsideDir := filepath.Join(e.work, "outside")
			if err := os.MkdirAll(outsideDir, 0o755); err != nil {
				t.Fatal(err)
			}
			writable := func(dirs ...string) func() {
				var modes []os.FileMode
				for _, d := range dirs {
					st, err := os.Stat(d)
					if err != nil {
						t.Fatal(err)
					}
					modes = append(modes, st.Mode().Perm())
					if err := os.Chmod(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				return func() {
					for i, d := range dirs {
						_ = os.Chmod(d, modes[i])
					}
				}
			}
			blobDir := filepath.Dir(filepath.Join(rel, e.victim))
			restore := writable(rel, filepath.Join(rel, "os"), blobDir, filepath.Join(rel, "payload"))
			plant := func(target, link string) {
				if err := os.Symlink(target, link); err != nil {
					t.Fatal(err)
				}
			}
			// Unlisted names.
			plant("/etc/passwd", filepath.Join(rel, "os", "passwd-link"))
			plant("/etc", filepath.Join(rel, "os", "etc"))
			plant("../../../../../../../../../../etc/passwd", filepath.Join(blobDir, "escape"))
			// A listed file replaced by a link to /etc/passwd.
			if err := os.Remove(filepath.Join(rel, e.victim)); err != nil {
				t.Fatal(err)
			}
			plant("/etc/passwd", filepath.Join(rel, e.victim))
			// A listed directory swapped for a link to a copy outside the
			// tree with the very same bytes: only the path gives it away.
			sysextDir := filepath.Join(rel, "sysext")
			if err := os.Rename(sysextDir, filepath.Join(outsideDir, "sysext")); err != nil {
				t.Fatal(err)
			}
			plant(filepath.Join(outsideDir, "sysext"), sysextDir)
			// A payload file linked to an identical copy outside.
			sig := filepath.Join(rel, "payload", "manifest.sig")
			sigBytes, err := os.ReadFile(sig)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(outsideDir, "manifest.sig"), sigBytes, 0o644)
			if err := os.Remove(sig); err != nil {
				t.Fatal(err)
			}
			plant(filepath.Join(outsideDir, "manifest.sig"), sig)
			restore()

			corruptBefore := e.metrics(t)["stratum_release_corrupt_total"]
			get := func(path string, hdr map[string]string) answer {
				return do(e.joiner(e.k1), "GET", e.releaseURL(e.r1, path), hdr, nil)
			}
			for _, p := range []string{"os/passwd-link", "os/etc/passwd", "os/blobs/sha256/escape", "os/etc/shadow"} {
				a := get(p, nil)
				c.check(a.is(404, "NOT_FOUND") && !outsideBytes(a.body), "unlisted link %s: %v", p, a)
			}
			refused := func(a answer) bool {
				return (a.is(503, "RELEASE_CORRUPT") || a.is(404, "NOT_FOUND")) && !outsideBytes(a.body)
			}
			for _, p := range []string{e.victim, e.victim, e.sysext, e.sysext, "payload/manifest.sig"} {
				a := get(p, nil)
				c.check(refused(a), "listed %s behind a link: %v", p, a)
				c.note("listed %s behind a link -> %d %s", p, a.status, a.apiErr().Code)
			}
			a := get(e.victim, map[string]string{"Range": "bytes=0-100"})
			c.check(refused(a), "a range of the linked %s: %v", e.victim, a)
			corruptAfter := e.metrics(t)["stratum_release_corrupt_total"]
			c.note("stratum_release_corrupt_total %v -> %v", corruptBefore, corruptAfter)
			// Files that were not touched are still served.
			a = get(e.blob, map[string]string{"Range": "bytes=0-0"})
			c.check(a.is(206, "") && bytes.Equal(a.body, e.files[e.blob][:1]), "the untouched blob after the links: %v", a)
			a = get("payload/manifest.json", nil)
			c.check(a.is(200, "") && bytes.Equal(a.body, e.manifest), "the untouched manifest after the links: %v", a)
		},
	}
}
