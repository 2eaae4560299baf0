package founder

import (
	"net/http"
	"stratum/internal/stratumtest"
	"testing"
	"time"
)

// The console is served on the admin listener only, under its CSP, and
// the registration list it long-polls holds while nothing changes.
func TestConsoleServedOnAdminListener(t *testing.T) {
	f := stratumtest.ServeDev(t, "")
	op := f.Operator(t)
	noRedirect := *f.Client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	joiner := f.Joiner(t, nil)
	cases := []struct {
		client   *http.Client
		url      string
		status   int
		location string
	}{
		{&noRedirect, "https://" + f.API + "/ui/joins", 200, ""},
		{&noRedirect, "https://" + f.API + "/ui/release-set", 200, ""},
		{&noRedirect, "https://" + f.API + "/", 302, "/ui/joins"},
		{&noRedirect, "https://" + f.API + "/ui", 302, "/ui/joins"},
		{&noRedirect, "https://" + f.API + "/ui/unknown", 404, ""},
		{joiner.HTTP, "https://" + f.Join + "/ui/joins", 404, ""},
	}
	for _, c := range cases {
		resp, err := c.client.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("GET %s = %d (Location %q), want %d %q", c.url, resp.StatusCode, resp.Header.Get("Location"), c.status, c.location)
		}
		if c.status == 200 && resp.Header.Get("Content-Security-Policy") != "default-src 'self'" {
			t.Errorf("GET %s: CSP %q", c.url, resp.Header.Get("Content-Security-Policy"))
		}
	}

	var first struct {
		Index string `json:"index"`
	}
	op.Must(t, "GET", "/v1/admin/join/registrations", nil, 200, &first)
	if first.Index == "" {
		t.Fatal("the list answer has no index")
	}
	start := time.Now()
	var held struct{ Index string }
	op.Must(t, "GET", "/v1/admin/join/registrations?wait=1&index="+first.Index, nil, 200, &held)
	if d := time.Since(start); d < time.Second || held.Index != first.Index {
		t.Errorf("an unchanged list answered after %v with index %q (was %q)", d, held.Index, first.Index)
	}
	if e := op.Must(t, "GET", "/v1/admin/join/registrations?wait=soon", nil, 400, nil); len(e.Fields) != 1 || e.Fields[0].Field != "wait" {
		t.Errorf("a bad wait: %+v", e)
	}
}
