package founder

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/internal/stratumtest"
	"stratum/wire"
)

// trustedTree writes a release tree of rel (upgrading from 0.1.0, its
// blob blobSize bytes) signed by a new key that the founder f trusts.
func trustedTree(t *testing.T, f *stratumtest.Founder, rel string, blobSize int) stratumtest.ReleaseTree {
	t.Helper()
	tree := stratumtest.SignedReleaseTree(t, rel, []string{"0.1.0"}, blobSize)
	tree.TrustOn(t, f)
	return tree
}

// TestReleaseMirrorThroughTheJoinListener: a needs-upgrade joiner reads
// the offered release through the real router; ranges resume; other keys,
// unlisted and tricky paths are 404.
func TestReleaseMirrorThroughTheJoinListener(t *testing.T) {
	cfg := cluster.DevDefaults()
	cfg.ClusterRelease = "0.2.0"
	dir := t.TempDir()
	if _, err := Init(DataDir(dir), cfg, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	f := stratumtest.ServeDev(t, dir)
	op := f.Operator(t)
	rt := trustedTree(t, f, "0.2.0", 3<<20+12345)
	tree, blobPath := rt.Dir, rt.Blob
	blob, err := os.ReadFile(filepath.Join(tree, blobPath))
	if err != nil {
		t.Fatal(err)
	}

	// Before any payload is imported, an older joiner cannot be offered one.
	token := joinToken(t, op, "worker", 3)
	j := f.Joiner(t, nil)
	var v wire.JoinerView
	e := j.Must(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "selfUpgrade": true, "hostname": "h", "mgmtIp": "192.0.2.50"}, 409, nil)
	if e.Code != apierr.ReleaseMismatch {
		t.Fatalf("no payload: %+v", e)
	}
	op.Must(t, "POST", "/v1/admin/releases", map[string]string{"path": tree}, 201, nil)
	j.Must(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "selfUpgrade": true, "hostname": "h", "mgmtIp": "192.0.2.50"}, 201, &v)
	if v.State != wire.StateNeedsUpgrade || v.Upgrade == nil || v.Upgrade.To != "0.2.0" || v.Upgrade.Source != "" {
		t.Fatalf("registration: %+v", v)
	}
	base := "/v1/join/registrations/" + v.JoinID + "/release/"

	get := func(c *http.Client, path, rangeHdr, ifRange string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", "https://"+f.Join+base+path, nil)
		if rangeHdr != "" {
			req.Header.Set("Range", rangeHdr)
		}
		if ifRange != "" {
			req.Header.Set("If-Range", ifRange)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	whole, body := get(j.HTTP, blobPath, "", "")
	if whole.StatusCode != 200 || string(body) != string(blob) || whole.Header.Get("ETag") == "" {
		t.Fatalf("whole file: %d, %d bytes", whole.StatusCode, len(body))
	}
	etag := whole.Header.Get("ETag")
	half := len(blob) / 2
	part, rest := get(j.HTTP, blobPath, "bytes="+itoa(half)+"-", etag)
	if part.StatusCode != 206 || string(body[:half])+string(rest) != string(blob) {
		t.Fatalf("resumed range: %d", part.StatusCode)
	}
	if r, _ := get(j.HTTP, blobPath, "bytes="+itoa(half)+"-", `"sha256:other"`); r.StatusCode != 200 {
		t.Fatalf("If-Range with another ETag answered %d, want the whole file", r.StatusCode)
	}
	if r, _ := get(j.HTTP, blobPath, "bytes=99999999-", ""); r.StatusCode != 416 {
		t.Fatalf("unsatisfiable: %d", r.StatusCode)
	}
	if r, b := get(j.HTTP, "payload/manifest.json", "", ""); r.StatusCode != 200 || !strings.Contains(string(b), `"0.2.0"`) {
		t.Fatalf("manifest: %d", r.StatusCode)
	}
	for _, p := range []string{"os/../" + blobPath, "%2e%2e/%2e%2e/stratum.db", "os/blobs/sha256/missing", "/etc/passwd", "os//blobs"} {
		if r, _ := get(j.HTTP, p, "", ""); r.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, r.StatusCode)
		}
	}
	if r, _ := get(f.Joiner(t, nil).HTTP, blobPath, "", ""); r.StatusCode != 404 {
		t.Errorf("another key: %d, want 404", r.StatusCode)
	}

	// After re-registering on the cluster release it is pending, and the
	// release is no longer served to it.
	j.Must(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.2.0", "selfUpgrade": true, "hostname": "h", "mgmtIp": "192.0.2.50"}, 200, &v)
	if v.State != wire.StatePending {
		t.Fatalf("after upgrading: %s", v.State)
	}
	if r, _ := get(j.HTTP, blobPath, "", ""); r.StatusCode != 404 {
		t.Errorf("served after needs-upgrade: %d", r.StatusCode)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
