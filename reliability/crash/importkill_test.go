package crash

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"stratum/internal/stratumtest"
	"stratum/release/repo"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestImportCrashWindows rebuilds, on disk, exactly what a SIGKILL leaves
// at each step of a re-import of release 0.2.0 (tree B over tree A), then
// starts the founder on it. repo.Service.Import (release/repo/import.go)
// copies into DIR/releases/.import-0.2.0-*, seals it, renames the live
// tree to .old-0.2.0-<new import id>, renames the new tree into place,
// and only then commits the store record; the leftovers are tidied by the
// next import (removeStale), not at start. Whatever step the kill hit,
// the restarted founder must serve the release its store lists, with the
// bytes that were signed.
//
// A random kill lands in the last two windows rarely (they last a rename,
// or one commit), so TestCrashConsistency may or may not meet them; this
// test meets each one every run.
func TestImportCrashWindows(t *testing.T) {
	t.Parallel()
	work := writableTempDir(t)
	rk := stratumtest.NewReleaseKey(t, filepath.Join(work, "keys"))
	a := makeReleaseTree(t, filepath.Join(work, "tree-a"), "0.2.0", "0.1.0", rk.Key, 4<<20)
	b := makeReleaseTree(t, filepath.Join(work, "tree-b"), "0.2.0", "0.1.0", rk.Key, 4<<20)

	// One cluster with tree A imported; each case starts from a copy.
	base := filepath.Join(work, "base")
	mustStratum(t, "init", "--data", base, "--config", writeConfig(t, work))
	rk.Trust(t, base)
	mustStratum(t, "release", "import", "--data", base, a.dir)

	for _, sc := range []struct {
		name string
		// leave arranges DIR/releases as the kill left it.
		leave func(t *testing.T, releases string)
	}{
		{"killed while copying", func(t *testing.T, releases string) {
			tmp := filepath.Join(releases, ".import-0.2.0-123456789")
			copyTree(t, b.dir, tmp)
			// Cut the blob short, as a copy in progress is.
			if err := os.Truncate(filepath.Join(tmp, filepath.FromSlash(b.blobPath)), 1<<20); err != nil {
				t.Fatal(err)
			}
		}},
		{"killed between the two renames", func(t *testing.T, releases string) {
			tmp := filepath.Join(releases, ".import-0.2.0-123456789")
			copyTree(t, b.dir, tmp)
			sealTree(t, tmp)
			rename(t, filepath.Join(releases, "0.2.0"), filepath.Join(releases, ".old-0.2.0-0123456789abcdef"))
		}},
		{"killed after the swap, before the commit", func(t *testing.T, releases string) {
			tmp := filepath.Join(releases, ".import-0.2.0-123456789")
			copyTree(t, b.dir, tmp)
			sealTree(t, tmp)
			rename(t, filepath.Join(releases, "0.2.0"), filepath.Join(releases, ".old-0.2.0-0123456789abcdef"))
			rename(t, tmp, filepath.Join(releases, "0.2.0"))
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(writableTempDir(t), "data")
			copyDir(t, base, dir)
			sc.leave(t, filepath.Join(dir, "releases"))

			api, join := freeAddrs(t)
			p, err := startServe(dir, api, join)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill()
			admin := httpClient(p.Pool, nil, true)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			session := p.Operator(t).Token

			var list struct{ Releases []releaseView }
			mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/releases", session, nil, 200, &list)
			if len(list.Releases) != 1 || list.Releases[0].ManifestSHA256 != a.manifestSum {
				t.Fatalf("releases after the restart: %+v, want 0.2.0 as first imported (manifest %s)", list.Releases, short(a.manifestSum))
			}
			sum, problems := treeOnDisk(filepath.Join(dir, "releases", "0.2.0"))
			if sum != a.manifestSum || len(problems) > 0 {
				t.Errorf("the store lists release 0.2.0 with manifest %s (tree A), but DIR/releases/0.2.0 holds manifest %q, problems %v: a kill during a re-import left the listed release without its tree",
					short(a.manifestSum), short(sum), problems)
			}

			// A joiner told to upgrade reads the listed release.
			var tok struct{ Token string }
			mustCall(t, ctx, admin, "POST", "https://"+api+"/v1/admin/join/tokens", session, map[string]any{"role": "worker"}, 201, &tok)
			key, err := stratumtest.MakeJoinerKey()
			if err != nil {
				t.Fatal(err)
			}
			joiner := httpClient(p.Pool, []tls.Certificate{key.Cert}, false)
			var reg joinerView
			mustCall(t, ctx, joiner, "POST", "https://"+join+"/v1/join/registrations", "", map[string]any{"token": tok.Token, "release": "0.1.0", "selfUpgrade": true, "hostname": "lab-9", "mgmtIp": "192.0.2.9"}, 201, &reg)
			st, raw, _, err := call(ctx, joiner, "GET", "https://"+join+"/v1/join/registrations/"+reg.JoinID+"/release/"+a.blobPath, "", nil, map[string]string{"Range": "bytes=0-65535"})
			switch {
			case err != nil:
				t.Fatal(err)
			case st != http.StatusPartialContent:
				t.Errorf("a needs-upgrade joiner reading the listed release 0.2.0 after the restart got %d %s", st, bytes.TrimSpace(raw))
			case !bytes.Equal(raw, a.blob[:65536]):
				t.Errorf("the listed release's blob served bytes that are not the signed ones")
			}
			var after struct{ Releases []releaseView }
			mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/releases", session, nil, 200, &after)
			if len(after.Releases) == 1 && len(after.Releases[0].Corrupt) > 0 {
				t.Errorf("release 0.2.0 is now marked corrupt (%v) until re-imported, though no file was damaged", after.Releases[0].Corrupt)
			}

			// The next import succeeds and leaves nothing behind.
			var imp map[string]any
			mustCall(t, ctx, admin, "POST", "https://"+api+"/v1/admin/releases", session, map[string]any{"path": b.dir, "replace": true}, 201, &imp)
			var final struct{ Releases []releaseView }
			mustCall(t, ctx, admin, "GET", "https://"+api+"/v1/admin/releases", session, nil, 200, &final)
			if len(final.Releases) != 1 || final.Releases[0].ManifestSHA256 != b.manifestSum || len(final.Releases[0].Corrupt) > 0 {
				t.Errorf("after re-importing tree B: %+v", final.Releases)
			}
			if sum, problems := treeOnDisk(filepath.Join(dir, "releases", "0.2.0")); sum != b.manifestSum || len(problems) > 0 {
				t.Errorf("after re-importing tree B the tree on disk has manifest %s, problems %v", short(sum), problems)
			}
			entries, _ := os.ReadDir(filepath.Join(dir, "releases"))
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("after a successful import DIR/releases still holds %s", e.Name())
				}
			}
			if code, _, err := p.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
				t.Errorf("SIGTERM: exit %d %v", code, err)
			}
			if r := stratum(t, "audit", "verify", "--data", dir); r.code != 0 {
				t.Errorf("audit verify: %d %s %s", r.code, r.stdout, r.stderr)
			}
			if t.Failed() {
				t.Logf("founder log:\n%s", p.Output())
			}
		})
	}
}

func mustCall(t *testing.T, ctx context.Context, c *http.Client, method, url, bearer string, body any, want int, out any) {
	t.Helper()
	st, raw, _, err := call(ctx, c, method, url, bearer, body, nil)
	if err != nil || st != want {
		t.Fatalf("%s %s: %d %s %v", method, url, st, bytes.TrimSpace(raw), err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
}

// copyTree copies a release tree (regular files and directories).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyDir copies a data directory with its file modes.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, dirMode{dst, info.Mode().Perm()})
			return os.MkdirAll(dst, 0o755)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			return err
		}
		return os.Chmod(dst, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			t.Fatal(err)
		}
	}
}

// sealTree makes a tree read-only with the importer's own step.
func sealTree(t *testing.T, dir string) {
	t.Helper()
	if err := repo.SealTree(dir); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(fmt.Errorf("rename: %w", err))
	}
}
