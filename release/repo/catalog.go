package repo

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"stratum/semver"
	"stratum/store"
	"stratum/wire"
)

// addMark files a corrupt mark's path under Missing or Corrupt.
func addMark(r *wire.ImportedRelease, path string, m corruptMark) {
	if strings.HasPrefix(m.Reason, missingReason) {
		r.Missing = append(r.Missing, path)
		return
	}
	r.Corrupt = append(r.Corrupt, path)
}

// fileIndex is what a reader needs of one file: its size, its hash (the
// ETag) and the SHA-256 of each 1 MiB chunk, concatenated.
type fileIndex struct {
	ImportID string `json:"importId"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Chunks   []byte `json:"chunks"`
	// subs is the sub-chunk index of the same import (subindex.go), kept
	// apart in the store: computed at import, loaded by Stat once.
	subs atomic.Pointer[[]byte]
}

func (fi *fileIndex) chunkCount() int64 { return (fi.Size + ChunkSize - 1) / ChunkSize }

func (fi *fileIndex) chunk(i int64) []byte { return fi.Chunks[i*32 : i*32+32] }

// corruptMark records a file that failed verification while served.
type corruptMark struct {
	ImportID string    `json:"importId"`
	At       time.Time `json:"at"`
	Reason   string    `json:"reason"`
}

func fileKey(release, path string) string { return release + "\x00" + path }

// keysWithPrefix collects the keys of bucket for release (deleting while
// iterating a bbolt bucket is not allowed).
func keysWithPrefix(tx *store.Tx, bucket store.Keyspace, release string) ([]string, error) {
	prefix := release + "\x00"
	var keys []string
	err := bucket.Keys(tx, func(k string) error {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	return keys, err
}

func deletePrefix(tx *store.Tx, bucket store.Keyspace, release string) error {
	keys, err := keysWithPrefix(tx, bucket, release)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := bucket.Delete(tx, k); err != nil {
			return err
		}
	}
	return nil
}

// listReleases returns the imported releases, oldest version first, each with the
// files found corrupt or missing since its import and its status.
func listReleases(db *store.DB, checks *Checks) ([]wire.ImportedRelease, error) {
	var out []wire.ImportedRelease
	err := db.View(func(tx *store.Tx) error {
		byRelease := map[string]int{}
		err := bucketReleases.ForEach(tx, func(k string, r wire.ImportedRelease) error {
			r.Corrupt, r.Missing = nil, nil
			byRelease[r.Release] = len(out)
			out = append(out, r)
			return nil
		})
		if err != nil {
			return err
		}
		return bucketCorrupt.ForEach(tx, func(k string, m corruptMark) error {
			rel, p, _ := strings.Cut(k, "\x00")
			if i, ok := byRelease[rel]; ok {
				addMark(&out[i], p, m)
			}
			return nil
		})
	})
	for i := range out {
		withStatus(&out[i], checks)
	}
	slices.SortFunc(out, func(a, b wire.ImportedRelease) int {
		return cmp.Or(semver.Compare(a.Release, b.Release), strings.Compare(a.Release, b.Release))
	})
	return out, err
}

// held lists the releases imported (their signature verified at import)
// with no file found corrupt since: what the founder can stand behind
// (SPEC 16.6: the admission release rises only to one of these).
func held(tx *store.Tx) ([]string, error) {
	corrupt := map[string]bool{}
	err := bucketCorrupt.Keys(tx, func(k string) error {
		rel, _, _ := strings.Cut(k, "\x00")
		corrupt[rel] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	err = bucketReleases.Keys(tx, func(k string) error {
		if !corrupt[k] {
			out = append(out, k)
		}
		return nil
	})
	return out, err
}

// getRelease returns one imported release.
func getRelease(db *store.DB, release string, checks *Checks) (*wire.ImportedRelease, bool, error) {
	var r wire.ImportedRelease
	var found bool
	err := db.View(func(tx *store.Tx) error {
		var err error
		if r, found, err = bucketReleases.Get(tx, release); err != nil || !found {
			return err
		}
		r.Corrupt, r.Missing = nil, nil
		keys, err := keysWithPrefix(tx, bucketCorrupt, release)
		for _, k := range keys {
			m, _, merr := bucketCorrupt.Get(tx, k)
			if merr != nil {
				return merr
			}
			addMark(&r, strings.TrimPrefix(k, release+"\x00"), m)
		}
		return err
	})
	if err != nil || !found {
		return nil, false, err
	}
	withStatus(&r, checks)
	return &r, true, nil
}

// storedIndex decodes the chunk index of the file at key, or nil.
func storedIndex(tx *store.Tx, key string) (*fileIndex, error) {
	raw := bucketFiles.Get(tx, key)
	if raw == nil {
		return nil, nil
	}
	fi := new(fileIndex)
	if err := json.Unmarshal(raw, fi); err != nil {
		return nil, fmt.Errorf("release file index %q: %w", key, err)
	}
	return fi, nil
}

// putIndex stores the chunk index of the file at key.
func putIndex(tx *store.Tx, key string, fi *fileIndex) error {
	raw, err := json.Marshal(fi)
	if err != nil {
		return err
	}
	return bucketFiles.Put(tx, key, raw)
}
