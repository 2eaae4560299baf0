package founder

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"stratum/apierr"
	"stratum/cluster"
	"stratum/internal/stratumtest"
	"stratum/release/releasetest"
	"stratum/release/repo"
	"stratum/wire"
)

// TestTrust08_FairReleaseSlots (SPEC 10.8) attacks the release slots of a
// running founder: one registration opens three reads and stalls them
// (the third is RELEASE_BUSY with Retry-After, another registration is
// still served, the stalled reads are cut and their slots come back), and
// a reader that keeps moving but outlives the longest read is cut. The
// limits are shortened (window 0.5 s, longest read 2.5 s) so the test
// runs in seconds; the rules are the same.
func TestTrust08_FairReleaseSlots(t *testing.T) {
	cfg := cluster.DevDefaults()
	cfg.ClusterRelease = "0.2.0"
	limits := repo.ReadLimits{Window: 500 * time.Millisecond, MaxRead: 2500 * time.Millisecond}
	dir := t.TempDir()
	if _, err := Init(DataDir(dir), cfg, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	// In this process: the read limits are shortened through Options.
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dir: dir, Dev: true, Serve: serveIn(func(o *Options) { o.ReleaseReads = limits })})
	op := f.Operator(t)

	// A release whose blob is far larger than what socket buffers hold,
	// so a reader that stops reading really stalls the founder's writes.
	rt := trustedTree(t, f, "0.2.0", 32<<20)
	tree, blobPath := rt.Dir, rt.Blob
	op.Must(t, "POST", "/v1/admin/releases", map[string]string{"path": tree}, 201, nil)
	blob, _ := os.ReadFile(filepath.Join(tree, blobPath))

	token := joinToken(t, op, "worker", 3)
	needsUpgrade := func(mgmt string) (*stratumtest.Client, string) {
		j := f.Joiner(t, nil)
		// A reader that does not read then really holds its slot.
		j.HTTP.Transport.(*http.Transport).DialContext = releasetest.StallingDialer()
		var v wire.JoinerView
		j.Must(t, "POST", "/v1/join/registrations", map[string]any{"token": token, "release": "0.1.0", "selfUpgrade": true, "hostname": "h", "mgmtIp": mgmt}, 201, &v)
		if v.State != wire.StateNeedsUpgrade {
			t.Fatalf("registration %s, want needs-upgrade", v.State)
		}
		return j, "https://" + f.Join + "/v1/join/registrations/" + v.JoinID + "/release/" + blobPath
	}
	get := func(j *stratumtest.Client, url, rangeHdr string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if rangeHdr != "" {
			req.Header.Set("Range", rangeHdr)
		}
		resp, err := j.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// One registration, three reads at once, none of them reading.
	a, urlA := needsUpgrade("192.0.2.81")
	held := []*http.Response{get(a, urlA, ""), get(a, urlA, "")}
	for i, r := range held {
		if r.StatusCode != 200 {
			t.Fatalf("read %d of the registration: %d", i+1, r.StatusCode)
		}
	}
	third := get(a, urlA, "")
	body, _ := io.ReadAll(third.Body)
	third.Body.Close()
	if ra, _ := strconv.Atoi(third.Header.Get("Retry-After")); third.StatusCode != 503 || ra < 1 || ra > 5 || !bytes.Contains(body, []byte(apierr.ReleaseBusy)) {
		t.Fatalf("third read of one registration: %d Retry-After %q %s", third.StatusCode, third.Header.Get("Retry-After"), body)
	}

	// Another registration is still served while the first holds its two.
	b, urlB := needsUpgrade("192.0.2.82")
	rb := get(b, urlB, "")
	if got, err := io.ReadAll(rb.Body); rb.StatusCode != 200 || err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("another registration: %d, %d bytes, %v", rb.StatusCode, len(got), err)
	}
	rb.Body.Close()

	// The stalled reads are cut: the registration's slots come back. Both
	// cuts are awaited first: one free slot already lets a range through,
	// and on a loaded machine the second cut may come a moment later.
	start := time.Now()
	for {
		m, err := f.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if m["stratum_release_reads_cut_total"] >= 2 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the stalled reads are not cut after %s (%v cut)", time.Since(start), m["stratum_release_reads_cut_total"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		r := get(a, urlA, "bytes=0-0")
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode == 206 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the stalled reads still hold their slots after %s", time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("stalled reads cut, slots back after %s", time.Since(start).Round(10*time.Millisecond))
	for i, r := range held {
		got, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err == nil || len(got) >= len(blob) || !bytes.Equal(got, blob[:len(got)]) {
			t.Errorf("stalled read %d: %d of %d bytes, %v: want a short body of right bytes", i+1, len(got), len(blob), err)
		}
	}

	// A reader that keeps moving (about 1.3 MiB/s, above the minimum
	// rate) but would need 25 s is cut at the longest read.
	c, urlC := needsUpgrade("192.0.2.83")
	rc := get(c, urlC, "")
	began := time.Now()
	var got []byte
	buf := make([]byte, 64<<10)
	var readErr error
	for readErr == nil {
		var n int
		n, readErr = io.ReadFull(rc.Body, buf)
		got = append(got, buf[:n]...)
		time.Sleep(50 * time.Millisecond)
	}
	rc.Body.Close()
	took := time.Since(began)
	if len(got) >= len(blob) || !bytes.Equal(got, blob[:len(got)]) || took < limits.MaxRead-time.Second || took > limits.MaxRead+5*time.Second {
		t.Fatalf("slow but steady read: %d of %d bytes in %s (%v), want cut near %s", len(got), len(blob), took, readErr, limits.MaxRead)
	}
	t.Logf("steady read cut after %s with %d bytes", took.Round(10*time.Millisecond), len(got))
}
