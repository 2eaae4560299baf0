package founder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"stratum/internal/stratumtest"
)

// Issue 34: the console of a restored founder says, on every page, that
// it is isolated until stratum takeover, and stops saying it after.
func TestConsoleShowsIsolation(t *testing.T) {
	tmp := t.TempDir()
	dirA, dirB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	a := stratumtest.ServeDev(t, dirA)
	email, password := a.Credentials(t)
	bak := filepath.Join(tmp, "drill.zst")
	stratumtest.MustRun(t, "backup", "--data", dirA, "--out", bak)
	a.Stop(os.Interrupt, 15*time.Second)
	os.MkdirAll(dirB, 0o700)
	key, _ := os.ReadFile(filepath.Join(dirA, "data.key"))
	os.WriteFile(filepath.Join(dirB, "data.key"), key, 0o600)
	stratumtest.MustRun(t, "restore", "--data", dirB, "--in", bak, "--ca-pin", a.Pin)
	f := stratumtest.ServeDev(t, dirB)

	b := newBrowser(t, "https://"+f.API)
	b.do("log in", chromedp.Navigate("https://"+f.API+"/ui/members"), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email), chromedp.SendKeys(chromedp.CSS(`input[name=password]`), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.within(10*time.Second, "the isolation banner", chromedp.WaitVisible(chromedp.CSS(`#isolated`)))
	if got := b.text(`#isolated`); !strings.Contains(got, "Isolated") || !strings.Contains(got, "drill.zst") || !strings.Contains(got, "stratum takeover") {
		t.Fatalf("the banner says %q", got)
	}
	b.checkNoProblems()

	stratumtest.MustRun(t, "takeover", "--data", dirB)
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`nav a[aria-current=page]`)))
	b.within(10*time.Second, "the isolation looked up again", chromedp.WaitReady(chromedp.CSS(`#isolated[data-checked=yes]`)))
	if !b.eval(`document.getElementById('isolated').hidden`) {
		t.Fatalf("the banner still shows after the take-over: %q", b.text(`#isolated`))
	}
}
