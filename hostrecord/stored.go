package hostrecord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"stratum/release"
	"stratum/semver"
	"stratum/wire"
)

// The payload directory (--payload-dir, /var/lib/stratum/upgrade on a
// node) keeps each release as its mirror publishes it:
//
//	releases/<release>/payload/manifest.json   (and manifest.sig, sysext/...)
//	os/<layout>/...                            the manifest's os/ files, shared
//	                                           by the releases of one OS layout
//
// A release is complete when every file its manifest lists is there at its
// size (hashes were checked when it was fetched). Anything else in the
// directory is a leftover.
const (
	releasesDir = "releases"
	osDir       = "os"
)

// collectStored fills stored and payloads. An unset directory leaves
// stored null (not read); a directory that does not exist keeps nothing.
func collectStored(ctx context.Context, h *Host, rec *wire.Record) error {
	if h.PayloadDir == "" {
		return nil
	}
	installed := installedRelease(h.Root)
	st, payloads, manifests, err := scanPayloads(ctx, h.PayloadDir, installed)
	if err != nil {
		return err
	}
	rec.Stored, rec.Payloads = st, payloads
	linkExtensions(rec.Extensions, st, manifests)
	return nil
}

// linkExtensions names, for each merged extension, the stored release
// whose manifest lists that extension at that version, with the root hash
// it records: the installed release first, then the others in order.
func linkExtensions(exts []wire.Extension, st *wire.Storage, manifests map[string]*release.Manifest) {
	order := make([]string, 0, len(st.Releases))
	for _, r := range st.Releases {
		if r.Installed {
			order = append([]string{r.Release}, order...)
		} else {
			order = append(order, r.Release)
		}
	}
	for i := range exts {
		e := &exts[i]
		if !e.Merged || e.Version == "" {
			continue
		}
	search:
		for _, rel := range order {
			for _, sx := range manifests[rel].Sysext {
				if sx.Name == e.Name && sx.Version == e.Version {
					e.Release, e.RootHash = rel, sx.RootHash
					break search
				}
			}
		}
	}
}

// installedRelease is what the joiner wrote to ROOT/etc/stratum/release.
func installedRelease(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "etc/stratum/release"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func scanPayloads(ctx context.Context, dir, installed string) (*wire.Storage, []wire.Payload, map[string]*release.Manifest, error) {
	st := &wire.Storage{}
	manifests := map[string]*release.Manifest{}
	top, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil, manifests, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	var payloads []wire.Payload
	layouts := map[string]bool{}
	for _, e := range top {
		if e.Name() != releasesDir && e.Name() != osDir || !e.IsDir() {
			st.Leftovers = append(st.Leftovers, wire.StoredDir{Path: e.Name()})
		}
	}
	rels, err := readDirIfAny(filepath.Join(dir, releasesDir))
	if err != nil {
		return nil, nil, nil, err
	}
	for _, e := range rels {
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		rel := path.Join(releasesDir, e.Name())
		m, raw, ok := storedManifest(dir, e)
		if !ok {
			st.Leftovers = append(st.Leftovers, wire.StoredDir{Path: rel})
			continue
		}
		manifests[m.Release] = m
		sr := wire.StoredRelease{Release: m.Release, Path: rel, Installed: m.Release == installed}
		if m.OS.Layout != "" && release.ValidPath(m.OS.Layout) == nil && !strings.Contains(m.OS.Layout, "/") {
			sr.OS = path.Join(osDir, m.OS.Layout)
			layouts[m.OS.Layout] = true
		}
		sr.Complete = complete(dir, rel, sr.OS, m)
		st.Releases = append(st.Releases, sr)
		if sr.Complete {
			sum := sha256.Sum256(raw)
			payloads = append(payloads, wire.Payload{Release: m.Release, SHA256: hex.EncodeToString(sum[:])})
		}
	}
	oses, err := readDirIfAny(filepath.Join(dir, osDir))
	if err != nil {
		return nil, nil, nil, err
	}
	for _, e := range oses {
		if !layouts[e.Name()] {
			st.Leftovers = append(st.Leftovers, wire.StoredDir{Path: path.Join(osDir, e.Name())})
		}
	}
	sort.Slice(st.Leftovers, func(i, j int) bool { return st.Leftovers[i].Path < st.Leftovers[j].Path })
	return st, payloads, manifests, nil
}

func readDirIfAny(dir string) ([]fs.DirEntry, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
		return nil, nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "not a directory") {
		return nil, nil
	}
	return es, err
}

// storedManifest reads a stored release's manifest; its directory must be
// named by the release it holds.
func storedManifest(dir string, e fs.DirEntry) (*release.Manifest, []byte, bool) {
	if !e.IsDir() || semver.Valid(e.Name()) != nil {
		return nil, nil, false
	}
	raw, err := os.ReadFile(filepath.Join(dir, releasesDir, e.Name(), filepath.FromSlash(release.ManifestPath)))
	if err != nil {
		return nil, nil, false
	}
	m, err := release.ParseManifest(raw)
	if err != nil || m.Release != e.Name() {
		return nil, nil, false
	}
	return m, raw, true
}

// complete: every listed file is present at its size.
func complete(dir, rel, osPath string, m *release.Manifest) bool {
	for _, f := range m.Files {
		p := path.Join(rel, f.Path)
		if rest, ok := strings.CutPrefix(f.Path, osDir+"/"); ok {
			if osPath == "" {
				return false
			}
			p = path.Join(osPath, rest)
		}
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Size {
			return false
		}
	}
	return true
}
