package repo

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"stratum/apierr"
	"stratum/release/releasetest"
	"stratum/store/storetest"
	"stratum/wire"
)

// SPEC 18: after a restore without the release files, or with a file
// changed on disk, the start-up check marks them, and the release is
// missing or corrupt, never verified; a joiner is told to retry while the
// check runs, then RELEASE_CORRUPT.
func TestRecheckMarksMissingAndCorrupt(t *testing.T) {
	db, dataDir := storetest.Temp(t)
	for _, rel := range []string{"0.6.0", "0.7.0", "0.8.0"} {
		src, _, pub := releasetest.SignedTree(t, ChunkSize+5, rel)
		if _, err := importTree(context.Background(), db, dataDir, src, releasetest.Keyring(t, 1, pub), ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// 0.6.0 lost a file, 0.7.0's sysext has a changed byte, 0.8.0 is whole.
	if err := os.Remove(filepath.Join(dataDir, "releases", "0.6.0", "os", "index.json")); err != nil {
		t.Fatal(err)
	}
	releasetest.FlipByte(t, filepath.Join(dataDir, "releases", "0.7.0", releasetest.SysextPath), 2<<20+3)

	checks := newChecks()
	checks.set([]string{"0.6.0", "0.7.0", "0.8.0"})
	m := newMirror(mirrorConfig{DB: db, DataDir: dataDir, Checks: checks})
	// While the check runs, a whole release is served (every byte is
	// verified as read); a file that turns out missing is retry advice.
	var e *apierr.Error
	if _, err := m.Stat("0.8.0", "os/index.json"); err != nil {
		t.Fatalf("Stat of a whole release while checking = %v", err)
	}
	fi, err := m.Stat("0.6.0", "os/index.json")
	if err != nil {
		t.Fatal(err)
	}
	if rd, err := m.Open("joiner", fi); !errors.As(err, &e) || e.Code != apierr.ReleaseBusy || e.RetryAfter == 0 {
		if rd != nil {
			rd.Close()
		}
		t.Fatalf("Open of a missing file while checking = %v, want RELEASE_BUSY with a delay", err)
	}
	if _, err := m.Stat("0.6.0", "os/index.json"); !errors.As(err, &e) || e.Code != apierr.ReleaseBusy {
		t.Fatalf("Stat of the marked file while checking = %v, want RELEASE_BUSY", err)
	}
	list, _ := listReleases(db, checks)
	for _, r := range list {
		want := wire.ReleaseChecking
		if r.Release == "0.6.0" {
			want = wire.ReleaseMissing // the read above found it so
		}
		if r.Status != want {
			t.Fatalf("%s while checking: %s, want %s", r.Release, r.Status, want)
		}
	}

	if err := recheck(context.Background(), db, dataDir, checks, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	list, _ = listReleases(db, checks)
	got := map[string]wire.ImportedRelease{}
	for _, r := range list {
		got[r.Release] = r
	}
	if r := got["0.6.0"]; r.Status != wire.ReleaseMissing || !slices.Equal(r.Missing, []string{"os/index.json"}) || !strings.Contains(r.Fix, "stratum release import") {
		t.Errorf("0.6.0 = %+v, want missing os/index.json with a fix", r)
	}
	if r := got["0.7.0"]; r.Status != wire.ReleaseCorrupt || !slices.Equal(r.Corrupt, []string{releasetest.SysextPath}) || r.Fix == "" {
		t.Errorf("0.7.0 = %+v, want corrupt sysext with a fix", r)
	}
	if r := got["0.8.0"]; r.Status != wire.ReleaseVerified || r.Fix != "" {
		t.Errorf("0.8.0 = %+v, want verified", r)
	}
	if _, err := m.Stat("0.6.0", "os/index.json"); !errors.As(err, &e) || e.Code != apierr.ReleaseCorrupt {
		t.Fatalf("Stat after the check = %v, want RELEASE_CORRUPT", err)
	}
	if _, err := m.Stat("0.8.0", "os/index.json"); err != nil {
		t.Fatalf("Stat of a verified release = %v", err)
	}
	if m.Offered("0.6.0") || m.Offered("0.7.0") || !m.Offered("0.8.0") {
		t.Error("a missing or corrupt release is offered, or a verified one is not")
	}
}
