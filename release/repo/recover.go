package repo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"stratum/semver"
	"stratum/store"
	"stratum/wire"
)

// SealTree makes the imported tree read-only (files 0444, directories
// 0555, deepest first) and syncs every directory so the tree is durable
// before the store says it exists. Exported for the crash tests, which
// leave a tree as an import killed after this step leaves it.
func SealTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return os.Chmod(p, 0o444)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		syncDir(dirs[i])
		if err := os.Chmod(dirs[i], 0o555); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes a read-only tree: directories are made writable
// first, since removing an entry needs write permission on its parent.
func removeTree(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// removeStale settles what an import killed half-way left behind, by what
// the store says committed: an import moves the previous tree aside as
// .old-<release>-<new import id>, swaps the new tree in, then commits.
//   - the record names the new import id: the commit happened, the aside
//     is garbage;
//   - otherwise the tree in place is the uncommitted one: it goes, and the
//     aside (the tree the record describes) comes back;
//   - a release directory with no record at all was never committed.
//
// It runs under importMu (or before serving), and the store lock keeps
// other processes out, so no other import owns these directories.
func removeStale(db *store.DB, releasesDir string) error {
	entries, err := os.ReadDir(releasesDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return ioError("read the releases directory", err)
	}
	recorded := func(release string) (*wire.ImportedRelease, error) {
		r, found, err := getRelease(db, release, nil)
		if err != nil || !found {
			return nil, err
		}
		return r, nil
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, ".old-")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '-')
		if i <= 0 || semver.Valid(rest[:i]) != nil {
			removeTree(filepath.Join(releasesDir, name))
			continue
		}
		release, newID := rest[:i], rest[i+1:]
		rec, err := recorded(release)
		if err != nil {
			return err
		}
		if rec != nil && rec.ImportID == newID {
			removeTree(filepath.Join(releasesDir, name))
			continue
		}
		final := filepath.Join(releasesDir, release)
		removeTree(final)
		if err := os.Rename(filepath.Join(releasesDir, name), final); err != nil {
			return ioError("restore the committed tree of "+release, err)
		}
	}
	entries, _ = os.ReadDir(releasesDir)
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".import-") || strings.HasPrefix(name, ".old-"):
			removeTree(filepath.Join(releasesDir, name))
		case semver.Valid(name) == nil:
			rec, err := recorded(name)
			if err != nil {
				return err
			}
			if rec == nil {
				removeTree(filepath.Join(releasesDir, name))
			}
		}
	}
	syncDir(releasesDir)
	return nil
}

// recoverImports settles an import interrupted by a crash; the founder runs it
// before serving, so a listed release is always served from its own tree.
func recoverImports(db *store.DB, dataDir string) error {
	importMu.Lock()
	defer importMu.Unlock()
	if err := removeStale(db, filepath.Join(dataDir, "releases")); err != nil {
		return err
	}
	return pruneCache(db, filepath.Join(dataDir, cacheDirName))
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
