package repo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"stratum/apierr"
	"stratum/semver"
	"stratum/store"
	"stratum/wire"
)

// Checks is the state of the start-up check of the release files (SPEC
// 18): the releases not checked yet. A restore may bring a store whose
// catalog names files that are not on disk (a backup made with
// --exclude-releases) or not as imported; until its files are checked a
// release is "checking". Its files are served meanwhile (every byte is
// verified as it is read), but a joiner asking for one that turns out
// missing or wrong is told to retry until the check has reached the
// release, then RELEASE_CORRUPT; a release with a bad file is "missing"
// or "corrupt" (the marks of bucketCorrupt), never "verified".
type Checks struct {
	mu      sync.Mutex
	pending map[string]bool
}

// newChecks returns a state with nothing pending.
func newChecks() *Checks { return &Checks{pending: map[string]bool{}} }

// Pending reports whether release is still to be checked.
func (c *Checks) Pending(release string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[release]
}

func (c *Checks) set(releases []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range releases {
		c.pending[r] = true
	}
}

func (c *Checks) done(release string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, release)
}

// checkingError is what a joiner hears about a release being checked.
func checkingError(release string) *apierr.Error {
	return &apierr.Error{
		Code:       apierr.ReleaseBusy,
		Message:    fmt.Sprintf("the founder is checking the files of release %s against their index (after a start or a restore); retry after the Retry-After delay", release),
		RetryAfter: 5,
	}
}

// missingReason starts the reason of a mark for a file that is not there.
const missingReason = "missing: "

// markReason is the reason a file's mark records: missing when it is not
// on disk at all, else what failed.
func markReason(releasesDir, rel, path string, cause error) string {
	if _, err := os.Lstat(filepath.Join(releasesDir, rel, filepath.FromSlash(path))); errors.Is(cause, fs.ErrNotExist) || errors.Is(err, fs.ErrNotExist) {
		return missingReason + cause.Error()
	}
	return cause.Error()
}

// withStatus fills r's status and the command that repairs it.
func withStatus(r *wire.ImportedRelease, checks *Checks) {
	switch {
	case len(r.Missing) > 0:
		r.Status = wire.ReleaseMissing
	case len(r.Corrupt) > 0:
		r.Status = wire.ReleaseCorrupt
	case checks.Pending(r.Release):
		r.Status = wire.ReleaseChecking
	default:
		r.Status = wire.ReleaseVerified
	}
	if r.Status == wire.ReleaseMissing || r.Status == wire.ReleaseCorrupt {
		r.Fix = fmt.Sprintf("stratum release import PATH-TO-%s (the signed tree of release %s; or stratum release push DIR): the same manifest replaces the files and clears the marks", r.Release, r.Release)
	}
}

// recheck reads every catalogued file of every release once (newest
// release first) and checks each chunk against its index: a file that is
// not there is marked missing, one that differs is marked corrupt. The
// founder runs it in the background at start; progress goes to the log. A
// shared store (PostgreSQL) keeps release content in the database, which
// the replicas' caches are filled from: nothing to check on disk there.
func recheck(ctx context.Context, db *store.DB, dataDir string, checks *Checks, log *slog.Logger) error {
	if db.KeepsContent() {
		return nil
	}
	type file struct {
		rel, path string
		fi        *fileIndex
	}
	byRelease := map[string][]file{}
	var total int64
	var files int
	err := db.View(func(tx *store.Tx) error {
		return bucketFiles.ForEach(tx, func(key string, raw []byte) error {
			if bucketCorrupt.Has(tx, key) {
				return nil
			}
			fi := new(fileIndex)
			if err := json.Unmarshal(raw, fi); err != nil {
				return fmt.Errorf("release file index %q: %w", key, err)
			}
			rel, path, _ := strings.Cut(key, "\x00")
			if !bucketReleases.Has(tx, rel) {
				return nil
			}
			byRelease[rel] = append(byRelease[rel], file{rel, path, fi})
			total += fi.Size
			files++
			return nil
		})
	})
	if err != nil {
		return err
	}
	releases := make([]string, 0, len(byRelease))
	for r := range byRelease {
		releases = append(releases, r)
	}
	slices.SortFunc(releases, func(a, b string) int { return cmp.Or(semver.Compare(b, a), strings.Compare(b, a)) })
	checks.set(releases)
	defer func() {
		for _, r := range releases {
			checks.done(r)
		}
	}()
	if files == 0 {
		return nil
	}
	log.Info("checking the imported release files against their index", "releases", len(releases), "files", files, "bytes", total)
	start, last := time.Now(), time.Now()
	releasesDir := filepath.Join(dataDir, "releases")
	var checked, missing, corrupt int
	var bytesDone int64
	for _, rel := range releases {
		for _, f := range byRelease[rel] {
			if err := ctx.Err(); err != nil {
				return err
			}
			_, err := subIndexOf(ctx, releasesDir, f.rel, f.path, f.fi)
			switch {
			case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
				return err
			case err != nil && transient(err):
				log.Error("release file cannot be checked now", "release", rel, "path", f.path, "err", err)
			case err != nil:
				reason := markReason(releasesDir, f.rel, f.path, err)
				if strings.HasPrefix(reason, missingReason) {
					missing++
				} else {
					corrupt++
				}
				if _, merr := markCorrupt(db, f.rel, f.path, f.fi.ImportID, reason); merr != nil {
					return merr
				}
				log.Error("release file is not as imported; marked until re-import", "release", rel, "path", f.path, "reason", reason)
			}
			checked++
			bytesDone += f.fi.Size
			if time.Since(last) > 5*time.Second {
				last = time.Now()
				log.Info("checking release files", "checked", checked, "of", files, "bytes", bytesDone, "of", total)
			}
		}
		checks.done(rel)
	}
	log.Info("release files checked", "files", checked, "missing", missing, "corrupt", corrupt, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// listStopped is List for a stopped founder (`release list --data`): a
// file not on disk at its indexed size is reported missing or corrupt,
// without marking the store; the bytes themselves are checked by the
// founder's start.
func listStopped(db *store.DB, dataDir string) ([]wire.ImportedRelease, error) {
	list, err := listReleases(db, nil)
	if err != nil {
		return nil, err
	}
	byRelease := map[string]int{}
	for i, r := range list {
		byRelease[r.Release] = i
	}
	err = db.View(func(tx *store.Tx) error {
		return bucketFiles.ForEach(tx, func(key string, raw []byte) error {
			rel, path, _ := strings.Cut(key, "\x00")
			i, ok := byRelease[rel]
			if !ok || bucketCorrupt.Has(tx, key) {
				return nil
			}
			var fi fileIndex
			if err := json.Unmarshal(raw, &fi); err != nil {
				return fmt.Errorf("release file index %q: %w", key, err)
			}
			st, err := os.Stat(filepath.Join(dataDir, "releases", rel, filepath.FromSlash(path)))
			switch {
			case err != nil:
				list[i].Missing = append(list[i].Missing, path)
			case st.Size() != fi.Size:
				list[i].Corrupt = append(list[i].Corrupt, path)
			}
			return nil
		})
	})
	for i := range list {
		withStatus(&list[i], nil)
	}
	return list, err
}
