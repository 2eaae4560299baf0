package stratumtest

import (
	"os"
	"syscall"
	"testing"
	"time"

	"stratum/apierr"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestHarness: a dev founder starts as a child, the admin logs in, the
// typed client answers the error envelope, a signed tree imports, and
// SIGTERM stops the founder cleanly.
func TestHarness(t *testing.T) {
	f := StartFounder(t, FounderOptions{Dev: true})
	if f.API == "" || f.Join == "" || len(f.Pin) < len("sha256:")+64 {
		t.Fatalf("banner: api %q join %q pin %q", f.API, f.Join, f.Pin)
	}
	admin := f.Admin(t)
	if e := admin.Must(t, "GET", "/v1/admin/join/registrations/j-nosuchjoin", nil, 404, nil); e.Code != apierr.NotFound {
		t.Fatalf("unknown registration: %+v", e)
	}
	if e := f.AdminClient().Must(t, "GET", "/v1/admin/releases", nil, 401, nil); e.Code != apierr.Unauthenticated {
		t.Fatalf("no token: %+v", e)
	}
	tree := SignedReleaseTree(t, "0.3.0", []string{"0.1.0"}, 1<<20)
	tree.Trust(t, f.Dir)
	admin.Must(t, "POST", "/v1/admin/releases", map[string]string{"path": tree.Dir}, 201, nil)
	var list struct{ Releases []struct{ Release string } }
	admin.Must(t, "GET", "/v1/admin/releases", nil, 200, &list)
	if len(list.Releases) != 1 || list.Releases[0].Release != "0.3.0" {
		t.Fatalf("releases %+v", list)
	}
	if code, took := f.Stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d after %s", code, took)
	}
	if r := Run(t, nil, "version"); r.Code != 0 {
		t.Fatalf("stratum version: %+v", r)
	}
}
