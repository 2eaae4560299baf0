package founder

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"stratum/internal/stratumtest"
	"stratum/ui"
	"stratum/wire"
)

// chromium finds the browser the console tests drive: $STRATUM_CHROMIUM,
// else Debian's chromium package.
func chromium() string {
	for _, name := range []string{os.Getenv("STRATUM_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium tab on the founder's admin listener.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string // exceptions and CSP violations the page reported
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium binary (Debian package chromium, installed by .ci/run): the console's browser tests cannot run here")
	}
	// The allocator gives the browser a temporary user-data-dir and
	// removes it afterwards. The founder's certificate is issued by the
	// test cluster's CA, which this throwaway profile does not trust.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.IgnoreCertErrors, chromedp.WindowSize(1440, 900))
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 5*time.Minute) // every page at four widths, on a machine that may be busy
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	b := &browser{t: t, ctx: ctx, base: base}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs steps, failing the test with what was being done.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// within runs steps under a deadline of its own.
func (b *browser) within(d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s (within %v): %v", what, d, err)
	}
}

func (b *browser) eval(expr string) bool {
	b.t.Helper()
	ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return ok
}

func (b *browser) evalString(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func (b *browser) number(expr string) float64 {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	return b.evalString(fmt.Sprintf(`document.querySelector(%q).getAttribute(%q) || ""`, sel, name))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// screenshot writes the whole page as PNG into dir and checks that it
// shows something: a blank or one-colour page means the console failed
// to render.
func (b *browser) screenshot(dir, name string) {
	b.t.Helper()
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		b.t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if colours, inked := inkOf(img); colours < 16 || inked < 0.02 {
		b.t.Errorf("screenshot %s looks blank: %d colours, %.1f%% of pixels differ from the background", name, colours, inked*100)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// inkOf counts the distinct colours of img and the share of pixels that
// differ from its top-left (background) pixel.
func inkOf(img image.Image) (colours int, inked float64) {
	r := img.Bounds()
	bg := img.At(r.Min.X, r.Min.Y)
	seen := map[[4]uint32]bool{}
	n, differ := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			c := img.At(x, y)
			r1, g1, b1, a1 := c.RGBA()
			seen[[4]uint32{r1, g1, b1, a1}] = true
			if c != bg {
				differ++
			}
			n++
		}
	}
	return len(seen), float64(differ) / float64(max(n, 1))
}

func (b *browser) checkNoProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("the page reported: %s", p)
	}
}

// setValue replaces what an input holds, as a person clearing it and
// typing would (chromedp's SetValue does not reach a textarea).
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); })()`, sel, v))
}

func row(joinID string) string { return fmt.Sprintf(`[data-join-id=%q]`, joinID) }

func (b *browser) waitState(joinID string, states ...string) {
	b.t.Helper()
	cond := fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && %q.split(",").includes(r.dataset.state); })()`, row(joinID), strings.Join(states, ","))
	b.within(10*time.Second, "row "+joinID+" in state "+strings.Join(states, " or "), chromedp.Poll[chromedp.Void](cond))
}

// TestConsoleInBrowser drives the operator console in headless Chromium
// against a real founder: login through the form, a joiner's registration
// appearing live, field errors beside their inputs, approval, rejection
// and cancellation reaching the API, the join command of a new token, the
// IAM gate on the approve button, every page's layout at 390, 800, 1024
// and 1440 px with long hostnames in its tables (checkLayout), and a
// non-blank screenshot of each page (kept in $STRATUM_CONSOLE_SHOTS when
// set, for docs/console/).
func TestConsoleInBrowser(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	b := newBrowser(t, "https://"+f.API)
	shots := os.Getenv("STRATUM_CONSOLE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}

	// A page path loads directly and asks for a login.
	b.do("open the joins page", chromedp.Navigate("https://"+f.API+"/ui/joins"), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	email, password := f.Credentials(t)
	b.do("fill in the login form", chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email), chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "wrong password"))
	b.screenshot(shots, "login")
	b.do("a wrong password is refused", chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`.login .form-error`)))
	b.do("log in", setValue(`input[name=password]`, password), chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-live=on]`)))

	// A real joiner key registers over TLS; its row appears without a reload.
	token := joinToken(t, op, "worker", 5)
	j1 := f.Joiner(t, nil)
	registered := time.Now()
	v1 := registerMachine(t, j1, token, longHostname("lab-r2-07"), "192.0.2.31")
	b.within(2*time.Second, "the new registration's row", chromedp.WaitVisible(chromedp.CSS(row(v1.JoinID)+` [data-action=approve]`)))
	t.Logf("a new registration appeared on the open joins page %v after it was sent", time.Since(registered).Round(time.Millisecond))
	b.waitState(v1.JoinID, wire.StatePending)
	if fp := b.attr(row(v1.JoinID)+` [data-fingerprint]`, "data-fingerprint"); fp != v1.KeyFingerprint {
		t.Errorf("the row carries fingerprint %q, the joiner has %q", fp, v1.KeyFingerprint)
	}
	if shown := b.text(row(v1.JoinID) + ` [data-fingerprint]`); len(shown) >= len(v1.KeyFingerprint) || !strings.HasPrefix(v1.KeyFingerprint, strings.TrimSuffix(shown[:15], "…")) {
		t.Errorf("the row shows the fingerprint as %q: want it shortened to its start and end", shown)
	}
	if !b.eval(`!!document.querySelector('[data-action=copy-fingerprint]')`) {
		t.Error("the fingerprint has no copy button")
	}

	// An invalid approval: every problem beside the input it names, and
	// nothing changes.
	b.do("open the approve form", chromedp.Click(chromedp.CSS(row(v1.JoinID)+` [data-action=approve]`)), chromedp.WaitVisible(chromedp.CSS(`input[name=nodeId]`)))
	for _, name := range []string{"nodeId", "mgmtIp", "az", "role", "labels", "networks"} {
		if !b.eval(fmt.Sprintf(`!!document.querySelector(%q)`, row(v1.JoinID)+` [name=`+name+`]`)) {
			t.Errorf("the approve form has no input named %s", name)
		}
	}
	if v := b.evalString(`document.querySelector('input[name=mgmtIp]').value`); v != "" {
		t.Errorf("the approve form is prefilled with a management IP %q", v)
	}
	b.do("submit an invalid assignment",
		chromedp.SendKeys(chromedp.CSS(`input[name=nodeId]`), "Bad_Id"),
		chromedp.SendKeys(chromedp.CSS(`textarea[name=networks]`), `{"storage": {"ip": "10.9.0.31/24", "interface": "vlan90"}}`),
		chromedp.Click(chromedp.CSS(`[data-action=submit-approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-field-error="nodeId"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-field-error="networks.storage.ip"]`)))
	for field, input := range map[string]string{"nodeId": "nodeId", "networks.storage.ip": "networks"} {
		if !b.eval(fmt.Sprintf(`document.querySelector('[data-field-error=%q]').closest('.field').querySelector('[name=%s]') !== null`, field, input)) {
			t.Errorf("the error for %s is not beside the input %s", field, input)
		}
	}
	var got wire.OperatorView
	op.Must(t, "GET", "/v1/admin/join/registrations/"+v1.JoinID, nil, 200, &got)
	if got.State != wire.StatePending {
		t.Fatalf("an invalid approval changed the state to %s", got.State)
	}
	b.screenshot(shots, "joins-approve-errors")

	// A valid approval moves the row on (approved, then its turn).
	b.do("submit a valid assignment",
		setValue(`input[name=nodeId]`, "n-console1"),
		setValue(`textarea[name=networks]`, ""),
		chromedp.SendKeys(chromedp.CSS(`textarea[name=labels]`), "topology.rack=r2"),
		chromedp.Click(chromedp.CSS(`[data-action=submit-approve]`)))
	b.waitState(v1.JoinID, wire.StateApproved, wire.StateDelivering)
	op.Must(t, "GET", "/v1/admin/join/registrations/"+v1.JoinID, nil, 200, &got)
	if got.Assignment == nil || got.Assignment.NodeID != "n-console1" || got.Assignment.Labels["topology.rack"] != "r2" {
		t.Fatalf("the approval reached the API as %+v", got.Assignment)
	}

	// A rejection with a reason reaches the API.
	j2 := f.Joiner(t, nil)
	v2 := registerMachine(t, j2, token, "lab-r3-02", "192.0.2.32")
	const reason = "wrong rack: this one belongs to lab-3"
	b.within(5*time.Second, "reject the second registration",
		chromedp.Click(chromedp.CSS(row(v2.JoinID)+` [data-action=reject]`)),
		chromedp.Click(chromedp.CSS(row(v2.JoinID)+` [data-action=submit-reject]`)),
		chromedp.WaitVisible(chromedp.CSS(row(v2.JoinID)+` [data-field-error=reason]`)))
	op.Must(t, "GET", "/v1/admin/join/registrations/"+v2.JoinID, nil, 200, &got)
	if got.State != wire.StatePending {
		t.Fatalf("a rejection without a reason changed the state to %s", got.State)
	}
	b.within(5*time.Second, "reject with a reason, confirmed",
		chromedp.SendKeys(chromedp.CSS(row(v2.JoinID)+` textarea[name=reason]`), reason),
		chromedp.Click(chromedp.CSS(row(v2.JoinID)+` [data-action=submit-reject]`)),
		chromedp.WaitVisible(chromedp.CSS(row(v2.JoinID)+` [data-action=submit-reject][data-confirm=yes]`)))
	op.Must(t, "GET", "/v1/admin/join/registrations/"+v2.JoinID, nil, 200, &got)
	if got.State != wire.StatePending {
		t.Fatalf("a rejection before its confirmation changed the state to %s", got.State)
	}
	b.within(5*time.Second, "confirm the rejection",
		chromedp.Click(chromedp.CSS(row(v2.JoinID)+` [data-action=submit-reject]`)))
	b.waitState(v2.JoinID, wire.StateRejected)
	op.Must(t, "GET", "/v1/admin/join/registrations/"+v2.JoinID, nil, 200, &got)
	if got.State != wire.StateRejected || got.Reason != reason {
		t.Fatalf("the rejection reached the API as %s %q", got.State, got.Reason)
	}

	// A third machine waits, so the pages have something pending to show.
	j3 := f.Joiner(t, nil)
	v3 := registerMachine(t, j3, token, longHostname("lab-r2-08"), "192.0.2.33")
	b.within(2*time.Second, "the third registration's row", chromedp.WaitVisible(chromedp.CSS(row(v3.JoinID))))

	// The token page: the exact join command of a new token.
	b.do("create a token",
		chromedp.Click(chromedp.CSS(`#nav a[data-page=tokens]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-action=create-token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=description]`), "rack r2 workers"),
		chromedp.Click(chromedp.CSS(`[data-action=create-token]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-join-command]`)))
	cmd := b.text(`[data-join-command]`)
	if !b.eval(`!!document.querySelector('[data-action=copy-join-command]')`) {
		t.Error("the join command has no copy button")
	}
	if !strings.HasPrefix(cmd, "stratum join ") || !strings.Contains(cmd, "--token sjt1.") || !strings.Contains(cmd, "--ca-pin sha256:") {
		t.Errorf("the token page shows the join command %q", cmd)
	}
	b.screenshot(shots, "tokens-created")

	// The release set has something to compare: the approved node records
	// a release that differs from the founder's own host.
	rec := map[string]any{"runningRelease": "0.1.0", "release": map[string]any{"imageMode": false,
		"os": map[string]any{"prettyName": "Debian GNU/Linux 12 (bookworm)", "id": "debian", "versionId": "12"}}}
	recorded := recordRelease(t, f, "n-console1", rec)

	// A release imported from a path on the founder, through the form.
	trusted := trustedTree(t, f, "0.2.0", 1<<20)
	b.do("import a release",
		chromedp.Navigate("https://"+f.API+"/ui/releases"),
		chromedp.SendKeys(chromedp.CSS(`input[name=path]`), trusted.Dir),
		chromedp.Click(chromedp.CSS(`[data-action=import-release]`)))
	b.within(20*time.Second, "the imported release's row", chromedp.WaitVisible(chromedp.CSS(`tr[data-release="0.2.0"]`)))
	consoleTrustsAKey(t, b, f, op, trusted, shots)

	// An inventory of one expected machine, for its page.
	op.Must(t, "PUT", "/v1/admin/inventory", map[string]any{"machines": []any{map[string]any{
		"match": map[string]string{"ekSha256": strings.Repeat("ab", 32)}, "nodeId": "n-rack0001", "role": "worker", "hostname": "lab-r3-01",
		"mgmtIp": "192.0.2.201", "az": "az1", "labels": map[string]string{"topology.rack": "r3"}}}}, 200, nil)

	// Each page loads directly from its own address, and at a phone's and
	// a half screen's width none scrolls sideways (SPEC 17); at those, a
	// small laptop's and a desktop's, with the long hostnames of v1 and v3
	// in its tables, no cell's content runs over its neighbour, no id or
	// size breaks over two lines and every link and button is on the
	// screen (checkLayout).
	pages := []struct{ page, ready string }{
		{"joins", row(v3.JoinID) + ` [data-action=approve]`},
		{"members", `[data-node-id="n-console1"]`},
		{"inventory", `tr[data-inventory-node="n-rack0001"][data-state=expected]`},
		{"release-set", `[data-skew-matrix]`},
		{"releases", `tr[data-key-file="k2.pub"][data-trusted=yes]`},
		{"tokens", `table.tokens tbody tr[data-token-id]`},
		{"audit", `[data-chain=intact]`},
	}
	for _, width := range []int64{390, 800, 1024} {
		b.do(fmt.Sprintf("a %d px wide window", width), chromedp.EmulateViewport(width, 844))
		for _, p := range pages {
			b.do(fmt.Sprintf("open /ui/%s at %d px", p.page, width), chromedp.Navigate("https://"+f.API+ui.Prefix+p.page), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			if sw, cw := b.number(`document.documentElement.scrollWidth`), b.number(`document.documentElement.clientWidth`); sw > cw {
				t.Errorf("/ui/%s at %d px scrolls sideways: the page is %v px wide", p.page, width, sw)
			}
			b.checkLayout(fmt.Sprintf("/ui/%s at %d px", p.page, width))
			if width == 390 {
				b.screenshot(shots, p.page+"-390")
			}
		}
	}
	// A phone approves: the approve form and its buttons are on its screen.
	b.do("the approve form at 390 px", chromedp.EmulateViewport(390, 844),
		chromedp.Navigate("https://"+f.API+ui.Prefix+"joins"),
		chromedp.Click(chromedp.CSS(row(v3.JoinID)+` [data-action=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(row(v3.JoinID)+` [data-action=submit-approve]`)))
	b.checkLayout("/ui/joins with the approve form open at 390 px")
	b.screenshot(shots, "joins-approve-390")

	// A table wider than a phone (the skew matrix of many nodes) scrolls
	// in its own box, which fades the edge where it hides more.
	fades, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(async () => {
		const { scroll, table } = await import('/ui/assets/js/dom.js');
		const box = scroll(table(Array.from({ length: 30 }, (_, i) => 'n-wide' + String(i).padStart(4, '0')), { class: 'grid matrix' }));
		document.querySelector('main').append(box);
		const settle = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
		const seen = [];
		for (const at of [0, 200, 1e6]) {
			box.scrollLeft = at;
			await settle();
			seen.push(box.dataset.more + (getComputedStyle(box).maskImage === 'none' ? '' : ' faded'));
		}
		box.remove();
		return seen.join(', ');
	})()`, chromedp.EvalAwaitPromise))
	if want := "right faded, both faded, left faded"; err != nil || fades != want {
		t.Errorf("a table wider than the phone, scrolled from start to end: %q (%v), want %q", fades, err, want)
	}
	b.do("back to a desktop window", chromedp.EmulateViewport(1440, 900))
	for _, p := range pages {
		b.do("open /ui/"+p.page, chromedp.Navigate("https://"+f.API+ui.Prefix+p.page), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		b.checkLayout("/ui/" + p.page + " at 1440 px")
		b.screenshot(shots, p.page)
		// A member that has not applied the generation is highlighted,
		// under its hostname.
		if p.page == "members" {
			if !b.eval(`!!document.querySelector('[data-node-id="n-console1"][data-behind=yes]')`) {
				t.Error("the members page does not highlight n-console1, which has not applied the generation")
			}
			if txt := b.text(`[data-node-id="n-console1"] td`); !strings.Contains(txt, "lab-r2-07") {
				t.Errorf("the members page shows n-console1 as %q, without its hostname", txt)
			}
		}
		// Two nodes that differ: each skew row colours their values apart.
		if p.page == "release-set" && recorded && !b.eval(`(() => {
				const rows = [...document.querySelectorAll('[data-skew-field]')];
				return rows.length > 0 && rows.every((r) => {
					const cells = [...r.querySelectorAll('td.cell')].map((c) => [...c.classList].find((k) => /^v\d$/.test(k)));
					return cells.length === 2 && cells[0] && cells[1] && cells[0] !== cells[1];
				});
			})()`) {
			t.Error("the skew matrix does not colour the two nodes' values apart")
		}
		// Chromium's zstd decoder reads a page of nodes[] as the founder
		// sends it: each recorded node's kept frame (internal/zframe)
		// between raw frames. The founder has recorded its own host.
		if p.page == "release-set" {
			got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(async () => {
				const s = JSON.parse(sessionStorage.getItem('stratum.session'));
				const r = await fetch('/v1/admin/upgrades/release?limit=500', { cache: 'no-store', credentials: 'omit',
					headers: { Accept: 'application/json', Authorization: 'Bearer ' + s.token } });
				const page = await r.json();
				const withOS = (page.nodes || []).filter((n) => n.release && n.release.os && n.release.os.id);
				return (r.headers.get('content-encoding') || 'identity') + ' ' + withOS.length;
			})()`, chromedp.EvalAwaitPromise))
			want := "zstd 1"
			if recorded {
				want = "zstd 2"
			}
			if err != nil || got != want {
				t.Errorf("a page of nodes[] fetched by the browser: coding and nodes with a release %q (%v), want %q", got, err, want)
			}
		}
	}

	// Cancel the join under way, with a reason.
	b.do("back to the joins page", chromedp.Navigate("https://"+f.API+"/ui/joins"), chromedp.WaitVisible(chromedp.CSS(row(v1.JoinID))))
	b.waitState(v1.JoinID, wire.StateDelivering)
	b.within(5*time.Second, "cancel the delivering join",
		chromedp.Click(chromedp.CSS(row(v1.JoinID)+` [data-action=cancel]`)),
		chromedp.SendKeys(chromedp.CSS(row(v1.JoinID)+` textarea[name=reason]`), "cabling fault"),
		chromedp.Click(chromedp.CSS(row(v1.JoinID)+` [data-action=submit-cancel]`)),
		chromedp.WaitVisible(chromedp.CSS(row(v1.JoinID)+` [data-action=submit-cancel][data-confirm=yes]`)),
		chromedp.Click(chromedp.CSS(row(v1.JoinID)+` [data-action=submit-cancel]`)))
	b.waitState(v1.JoinID, wire.StateFailed)
	op.Must(t, "GET", "/v1/admin/join/registrations/"+v1.JoinID, nil, 200, &got)
	if got.State != wire.StateFailed || got.Reason != "cabling fault" {
		t.Errorf("the cancellation reached the API as %s %q", got.State, got.Reason)
	}

	// A stalled install names the member it waits for (SPEC 17): j4's
	// node joins (nobody to wait for), then j5's install waits for it, as
	// it has no agent to apply the new generation.
	j4, j5 := f.Joiner(t, nil), f.Joiner(t, nil)
	v4 := registerMachine(t, j4, token, "lab-r4-01", "192.0.2.34")
	op.Must(t, "POST", "/v1/admin/join/registrations/"+v4.JoinID+"/approve", map[string]any{"nodeId": "n-console4"}, 200, nil)
	for _, phase := range []string{"installing", "done"} {
		j4.Must(t, "POST", "/v1/join/registrations/"+v4.JoinID+"/progress", map[string]string{"phase": phase}, 200, nil)
	}
	v5 := registerMachine(t, j5, token, "lab-r4-02", "192.0.2.35")
	op.Must(t, "POST", "/v1/admin/join/registrations/"+v5.JoinID+"/approve", map[string]any{"nodeId": "n-console5"}, 200, nil)
	for _, phase := range []string{"installing", "done"} {
		j5.Must(t, "POST", "/v1/join/registrations/"+v5.JoinID+"/progress", map[string]string{"phase": phase}, 200, nil)
	}
	b.waitState(v5.JoinID, wire.StateInstalling)
	b.within(5*time.Second, "the stalled install names n-console4",
		chromedp.WaitVisible(chromedp.CSS(row(v5.JoinID)+` [data-waiting-for="n-console4"]`)))
	if txt := b.text(row(v5.JoinID) + ` [data-waiting-for]`); !strings.Contains(txt, "n-console4") || !strings.Contains(txt, "to apply generation") {
		t.Errorf("the stalled install says %q", txt)
	}
	b.screenshot(shots, "joins-stalled")

	// n-console4 is gone for good: removed from the members page (at a
	// phone's width, with a reason and a confirmation), the install it
	// held completes. The founder and a joining member offer no removal.
	b.do("the members page at 390 px", chromedp.EmulateViewport(390, 844),
		chromedp.Navigate("https://"+f.API+ui.Prefix+"members"), chromedp.WaitVisible(chromedp.CSS(`[data-node-id="n-console4"] [data-action=remove]`)))
	if b.eval(`!!document.querySelector('tr[data-node-id]:first-child [data-action=remove], [data-node-id="n-console5"] [data-action=remove]')`) {
		t.Error("the founder or a joining member is offered the remove button")
	}
	b.within(5*time.Second, "remove n-console4 without a reason",
		chromedp.Click(chromedp.CSS(`[data-node-id="n-console4"] [data-action=remove]`)),
		chromedp.Click(chromedp.CSS(`[data-remove-form="n-console4"] [data-action=submit-remove]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-remove-form="n-console4"] [data-field-error=reason]`)))
	if sw, cw := b.number(`document.documentElement.scrollWidth`), b.number(`document.documentElement.clientWidth`); sw > cw {
		t.Errorf("/ui/members with the remove form open at 390 px scrolls sideways: the page is %v px wide", sw)
	}
	b.checkLayout("/ui/members with the remove form open at 390 px")
	b.within(5*time.Second, "remove n-console4 with a reason, asked to confirm",
		chromedp.SendKeys(chromedp.CSS(`[data-remove-form="n-console4"] textarea[name=reason]`), "chassis returned"),
		chromedp.Click(chromedp.CSS(`[data-remove-form="n-console4"] [data-action=submit-remove]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-remove-form="n-console4"] [data-action=submit-remove][data-confirm=yes]`)))
	b.screenshot(shots, "members-remove-390")
	var members wire.MembersView
	op.Must(t, "GET", "/v1/admin/cluster/members", nil, 200, &members)
	if len(members.Members) != 3 {
		t.Fatalf("a removal before its confirmation changed the members: %+v", members.Members)
	}
	b.within(5*time.Second, "confirm the removal",
		chromedp.Click(chromedp.CSS(`[data-remove-form="n-console4"] [data-action=submit-remove]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`[data-node-id="n-console4"]`)))
	op.Must(t, "GET", "/v1/admin/join/registrations/"+v5.JoinID, nil, 200, &got)
	if got.State != wire.StateJoined {
		t.Errorf("the install n-console4 held did not complete: %s", got.State)
	}
	b.do("back to a desktop window", chromedp.EmulateViewport(1440, 900))

	consoleShowsWhoIsBehind(t, b, f, op, shots)

	// A token without join:ApproveNodeJoin sees no approve button, and the
	// API refuses it all the same.
	reader := apiToken(t, op, "join:List*", "join:Get*")
	b.do("sign in with a read-only token",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem('stratum.session', JSON.stringify({token: %q}))`, reader)),
		chromedp.Navigate("https://"+f.API+"/ui/joins"), chromedp.WaitVisible(chromedp.CSS(row(v3.JoinID))))
	if b.eval(fmt.Sprintf(`!!document.querySelector(%q)`, row(v3.JoinID)+` [data-action=approve]`)) {
		t.Error("a token without join:ApproveNodeJoin is offered the approve button")
	}
	if e := op.As(reader).Must(t, "POST", "/v1/admin/join/registrations/"+v3.JoinID+"/approve", map[string]any{}, 403, nil); !strings.Contains(e.Message, "join:ApproveNodeJoin") {
		t.Errorf("the refusal does not name the action: %q", e.Message)
	}

	// A token that may list the release keys but not trust one sees the
	// keys without the trust form, and the API refuses it all the same.
	keyReader := apiToken(t, op, "upgrade:DescribeRelease")
	b.do("sign in with a token that may not trust keys",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem('stratum.session', JSON.stringify({token: %q}))`, keyReader)),
		chromedp.Navigate("https://"+f.API+"/ui/releases"), chromedp.WaitVisible(chromedp.CSS(`tr[data-key-file="k2.pub"][data-trusted=yes]`)))
	if b.eval(`!!document.querySelector('form.trust-key, [data-action=trust-key]')`) {
		t.Error("a token without upgrade:TrustReleaseKey is offered the trust form")
	}
	if e := op.As(keyReader).Must(t, "POST", "/v1/admin/release-keys", wire.TrustReleaseKey{PublicKey: "x"}, 403, nil); !strings.Contains(e.Message, "upgrade:TrustReleaseKey") {
		t.Errorf("the refusal does not name the action: %q", e.Message)
	}
	b.checkNoProblems()
}

// consoleShowsWhoIsBehind: once the admission release is raised above
// what a node runs, the release set page shows the admission release,
// names every node the summary says is behind (over every node, not the
// nodes fetched) and marks them in the nodes table under their hostnames;
// nothing on the page reads "null".
func consoleShowsWhoIsBehind(t *testing.T, b *browser, f *stratumtest.Founder, op *stratumtest.Client, shots string) {
	t.Helper()
	// n-console5 (joined) runs 0.1.0; the founder follows the admission
	// release it admits joiners on.
	rec := map[string]any{"runningRelease": "0.1.0", "release": map[string]any{"imageMode": false,
		"os": map[string]any{"prettyName": "Debian GNU/Linux 12 (bookworm)", "id": "debian", "versionId": "12"}}}
	if !recordRelease(t, f, "n-console5", rec) {
		t.Fatal("n-console5, joined, could not record its release")
	}
	op.Must(t, "PUT", "/v1/admin/cluster/release", wire.SetAdmissionRequest{Release: "0.9.0"}, 200, nil)
	var sum wire.ReleaseSet
	op.Must(t, "GET", "/v1/admin/upgrades/release?view=summary", nil, 200, &sum)
	if sum.Summary.BehindCount != 1 || sum.Summary.Behind[0].NodeID != "n-console5" || sum.Summary.Consistent {
		t.Fatalf("with the admission release at 0.9.0 nobody is behind: %+v", sum.Summary)
	}
	b.do("the release set with nodes behind", chromedp.Navigate("https://"+f.API+ui.Prefix+"release-set"),
		chromedp.WaitVisible(chromedp.CSS(`[data-behind-node]`)))
	b.screenshot(shots, "release-set-behind")
	if got := b.text(`[data-admission-release]`); got != "0.9.0" {
		t.Errorf("the release set page shows the admission release %q", got)
	}
	if got := b.attr(`[data-behind-count]`, "data-behind-count"); got != fmt.Sprint(sum.Summary.BehindCount) {
		t.Errorf("the release set page counts %s nodes behind, the API %d", got, sum.Summary.BehindCount)
	}
	for _, n := range sum.Summary.Behind {
		if !b.eval(fmt.Sprintf(`!!document.querySelector('[data-behind-node=%q]') && !!document.querySelector('[data-release-node=%q] [data-node-behind]')`, n.NodeID, n.NodeID)) {
			t.Errorf("the release set page does not show %s (%s) behind", n.NodeID, n.RunningRelease)
		}
	}
	if b.eval(`document.querySelector('.page-body').textContent.includes('null')`) {
		t.Errorf("the release set page reads %q", b.text(`.page-body`))
	}
}

// registerMachine registers j as a joiner does, with the facts an
// operator compares before approving.
func registerMachine(t *testing.T, j *stratumtest.Client, token, hostname, mgmt string) wire.JoinerView {
	t.Helper()
	facts := map[string]any{
		"arch": "amd64", "os": "linux", "cpus": 16, "memoryBytes": 64 << 30, "kernel": "6.1.0-28-amd64",
		"osRelease": "Debian GNU/Linux 12 (bookworm)", "addresses": []string{mgmt + "/24"},
		"disks": []map[string]any{{"name": "nvme0n1", "sizeBytes": 1920383410176}, {"name": "nvme1n1", "sizeBytes": 1920383410176}},
		"nics":  []map[string]any{{"name": "eno1", "mac": "3c:ec:ef:10:20:31"}, {"name": "ens2f0", "mac": "b8:59:9f:aa:bb:31"}},
		"tpm":   true,
	}
	var v wire.JoinerView
	j.Must(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "hostname": hostname, "mgmtIp": mgmt, "facts": facts}, 201, &v)
	return v
}

// recordRelease records a node's release with the admin's token. Where
// the founder accepts records only from a node in its join's later
// states, the release set simply shows the node unrecorded.
func recordRelease(t *testing.T, f *stratumtest.Founder, nodeID string, rec map[string]any) (accepted bool) {
	t.Helper()
	status, _, err := f.Operator(t).Raw("PUT", "/v1/cluster/nodes/"+nodeID+"/release", rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recording %s's release: %d", nodeID, status)
	return status == http.StatusNoContent
}

// consoleTrustsAKey drives the releases page's release keys (SPEC 16.2):
// a key file dropped into the founder's release keys is listed untrusted,
// saying how to trust it, and the import of a release it signed is
// refused naming it; a bad paste in the trust form shows its field error
// and trusts nothing; the key pasted, named and confirmed is trusted
// (the API says so) and the same import goes through. The page is on
// /ui/releases with the release trusted signed imported.
func consoleTrustsAKey(t *testing.T, b *browser, f *stratumtest.Founder, op *stratumtest.Client, trusted stratumtest.ReleaseTree, shots string) {
	t.Helper()
	signed := stratumtest.SignedReleaseTree(t, "0.3.0", []string{"0.1.0"}, 4096)
	pem, err := os.ReadFile(signed.PubFile)
	if err != nil {
		t.Fatal(err)
	}
	dropped := filepath.Join(f.Dir, "release-keys", "k2.pub")
	if err := os.WriteFile(dropped, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	const k2 = `tr[data-key-file="k2.pub"]`
	b.do("the releases page lists the dropped key file",
		chromedp.Navigate("https://"+f.API+"/ui/releases"), chromedp.WaitVisible(chromedp.CSS(k2)))
	if got := b.attr(k2, "data-trusted"); got != "no" {
		t.Errorf("the dropped key file is listed with data-trusted=%q, want no", got)
	}
	if got := b.attr(fmt.Sprintf(`tr[data-key-file=%q]`, trusted.KeyID[:16]+".pub"), "data-trusted"); got != "yes" {
		t.Errorf("the key trusted through the API is listed with data-trusted=%q, want yes", got)
	}
	if id := b.attr(k2+` [data-fingerprint]`, "data-fingerprint"); id != signed.KeyID {
		t.Errorf("the dropped key file's row carries key id %q, want %q", id, signed.KeyID)
	}
	if shown := b.text(k2 + ` [data-fingerprint]`); len(shown) >= len(signed.KeyID) {
		t.Errorf("the key id is shown whole (%q): want it shortened", shown)
	}
	if !b.eval(`!!document.querySelector('tr[data-key-file="k2.pub"] [data-action=copy-fingerprint]')`) {
		t.Error("the key id has no copy button")
	}
	if how := b.text(k2 + ` [data-how-to-trust]`); !strings.Contains(how, "stratum release trust-key") || !strings.Contains(how, "k2.pub") {
		t.Errorf("the untrusted key file says %q: want how to trust it", how)
	}

	// The import of a release it signed is refused, naming the file.
	b.within(20*time.Second, "import a release signed by the dropped key",
		setValue(`input[name=path]`, signed.Dir),
		chromedp.Click(chromedp.CSS(`[data-action=import-release]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.import .form-error`)))
	if msg := b.text(`form.import .form-error`); !strings.Contains(msg, "k2.pub") || !strings.Contains(msg, "trust-key") {
		t.Errorf("the refused import says %q: want the untrusted file and how to trust it", msg)
	}
	if n := strings.Count(b.text(`form.import .form-error`), "k2.pub holds key"); n != 1 {
		t.Errorf("the refused import's error says the same %d times", n)
	}

	keys := func() map[string]wire.ReleaseKey {
		t.Helper()
		var out wire.ReleaseKeys
		op.Must(t, "GET", "/v1/admin/release-keys", nil, 200, &out)
		m := map[string]wire.ReleaseKey{}
		for _, k := range out.Keys {
			m[k.File] = k
		}
		return m
	}
	before := keys()

	// A bad paste: the API's field error beside the textarea, nothing
	// trusted or written, and the confirmation is asked again.
	b.within(10*time.Second, "trust a bad paste, confirmed",
		setValue(`textarea[name=publicKey]`, "-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----"),
		setValue(`input[name=name]`, "k2.pub"),
		chromedp.Click(chromedp.CSS(`[data-action=trust-key]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-action=trust-key][data-confirm=yes]`)),
		chromedp.Click(chromedp.CSS(`[data-action=trust-key]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.trust-key [data-field-error=publicKey]`)))
	if !b.eval(`document.querySelector('form.trust-key [data-field-error=publicKey]').closest('.field').querySelector('[name=publicKey]') !== null`) {
		t.Error("the bad paste's error is not beside the public key's textarea")
	}
	if after := keys(); len(after) != len(before) || after["k2.pub"].Trusted {
		t.Errorf("a bad paste changed the release keys: %+v, before %+v", after, before)
	}
	if now, err := os.ReadFile(dropped); err != nil || !bytes.Equal(now, pem) {
		t.Errorf("a bad paste changed k2.pub (%v): %q", err, now)
	}
	if b.eval(`!!document.querySelector('[data-action=trust-key][data-confirm=yes]')`) {
		t.Error("after a refused paste the form stays confirmed: a new paste would be sent unasked")
	}

	// The key itself: asked to confirm (nothing trusted before), then
	// trusted, the list refreshed.
	b.within(10*time.Second, "trust the dropped key's public key, asked to confirm",
		setValue(`textarea[name=publicKey]`, string(pem)),
		chromedp.Click(chromedp.CSS(`[data-action=trust-key]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-action=trust-key][data-confirm=yes]`)))
	if keys()["k2.pub"].Trusted {
		t.Fatal("the key was trusted before its confirmation")
	}
	// The confirmation shows the pasted key's id, worked out in the
	// browser, to compare with the signer's before anything is sent.
	if line := b.text(`form.trust-key .confirm`); !strings.Contains(line, "Key id "+signed.KeyID) {
		t.Errorf("the confirmation does not show the pasted key's id %s: %q", signed.KeyID, line)
	}
	b.screenshot(shots, "releases-trust-key")
	b.within(10*time.Second, "confirm: the list shows k2.pub trusted",
		chromedp.Click(chromedp.CSS(`[data-action=trust-key]`)),
		chromedp.WaitVisible(chromedp.CSS(k2+`[data-trusted=yes]`)))
	if k := keys()["k2.pub"]; !k.Trusted || k.KeyID != signed.KeyID {
		t.Fatalf("after trusting through the form the API lists k2.pub as %+v", k)
	}
	b.within(20*time.Second, "the import signed by the now trusted key",
		setValue(`input[name=path]`, signed.Dir),
		chromedp.Click(chromedp.CSS(`[data-action=import-release]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-release="0.3.0"]`)))
	op.Must(t, "GET", "/v1/admin/releases/0.3.0", nil, 200, nil)
}
