package founder

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/release"
	"stratum/wire"
)

// signedTree writes a small release tree signed by a new key, and trusts
// the key in the founder's data directory.
func signedTree(t *testing.T, dir DataDir, rel string) (tree, blobPath string, blob []byte) {
	t.Helper()
	work := t.TempDir()
	tree = filepath.Join(work, "tree")
	blob = make([]byte, 3<<20+12345)
	rand.Read(blob)
	sum := sha256.Sum256(blob)
	blobPath = "os/blobs/sha256/" + hex.EncodeToString(sum[:])
	os.MkdirAll(filepath.Join(tree, filepath.Dir(blobPath)), 0o755)
	if err := os.WriteFile(filepath.Join(tree, blobPath), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Keygen(filepath.Join(work, "k")); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Sign(tree, filepath.Join(work, "k.key"), rel, []string{"0.1.0"}); err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(filepath.Join(work, "k.pub"))
	os.WriteFile(filepath.Join(dir.ReleaseKeys(), "k.pub"), pub, 0o644)
	return tree, blobPath, blob
}

// TestReleaseMirrorThroughTheJoinListener: a needs-upgrade joiner reads
// the offered release through the real router; ranges resume; other keys,
// unlisted and tricky paths are 404.
func TestReleaseMirrorThroughTheJoinListener(t *testing.T) {
	cfg := cluster.DevDefaults()
	cfg.ClusterRelease = "0.2.0"
	f := startFounder(t, &cfg, nil)
	tree, blobPath, blob := signedTree(t, f.dir, "0.2.0")

	// Before any payload is imported, an older joiner cannot be offered one.
	token := f.joinToken("worker", 3)
	j := f.newJoiner()
	var v wire.JoinerView
	e := j.do(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "selfUpgrade": true, "hostname": "h", "mgmtIp": "192.0.2.50"}, 409, nil)
	if e.Code != apierr.ReleaseMismatch {
		t.Fatalf("no payload: %+v", e)
	}
	f.admin("POST", "/v1/admin/releases", map[string]string{"path": tree}, 201, nil)
	j.do(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "selfUpgrade": true, "hostname": "h", "mgmtIp": "192.0.2.50"}, 201, &v)
	if v.State != wire.StateNeedsUpgrade || v.Upgrade == nil || v.Upgrade.To != "0.2.0" || v.Upgrade.Source != "" {
		t.Fatalf("registration: %+v", v)
	}
	base := "/v1/join/registrations/" + v.JoinID + "/release/"

	get := func(c *http.Client, path, rangeHdr, ifRange string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", f.join+base+path, nil)
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
	whole, body := get(j.client, blobPath, "", "")
	if whole.StatusCode != 200 || string(body) != string(blob) || whole.Header.Get("ETag") == "" {
		t.Fatalf("whole file: %d, %d bytes", whole.StatusCode, len(body))
	}
	etag := whole.Header.Get("ETag")
	half := len(blob) / 2
	part, rest := get(j.client, blobPath, "bytes="+itoa(half)+"-", etag)
	if part.StatusCode != 206 || string(body[:half])+string(rest) != string(blob) {
		t.Fatalf("resumed range: %d", part.StatusCode)
	}
	if r, _ := get(j.client, blobPath, "bytes="+itoa(half)+"-", `"sha256:other"`); r.StatusCode != 200 {
		t.Fatalf("If-Range with another ETag answered %d, want the whole file", r.StatusCode)
	}
	if r, _ := get(j.client, blobPath, "bytes=99999999-", ""); r.StatusCode != 416 {
		t.Fatalf("unsatisfiable: %d", r.StatusCode)
	}
	if r, b := get(j.client, "payload/manifest.json", "", ""); r.StatusCode != 200 || !strings.Contains(string(b), `"0.2.0"`) {
		t.Fatalf("manifest: %d", r.StatusCode)
	}
	for _, p := range []string{"os/../" + blobPath, "%2e%2e/%2e%2e/stratum.db", "os/blobs/sha256/missing", "/etc/passwd", "os//blobs"} {
		if r, _ := get(j.client, p, "", ""); r.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, r.StatusCode)
		}
	}
	if r, _ := get(f.newJoiner().client, blobPath, "", ""); r.StatusCode != 404 {
		t.Errorf("another key: %d, want 404", r.StatusCode)
	}

	// After re-registering on the cluster release it is pending, and the
	// release is no longer served to it.
	j.do(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.2.0", "selfUpgrade": true, "hostname": "h", "mgmtIp": "192.0.2.50"}, 200, &v)
	if v.State != wire.StatePending {
		t.Fatalf("after upgrading: %s", v.State)
	}
	if r, _ := get(j.client, blobPath, "", ""); r.StatusCode != 404 {
		t.Errorf("served after needs-upgrade: %d", r.StatusCode)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
