package repo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
)

// indexCache keeps decoded file indexes: decoding a large file's chunk
// index on every request cost a fifth of a 64 KiB ranged read. An entry
// is reused only while the stored bytes are identical, so a re-import
// (new import id, new hashes) is never answered from a stale index.
type indexCache struct {
	mu      sync.Mutex
	entries map[string]cachedIndex
}

type cachedIndex struct {
	raw []byte
	fi  *fileIndex
}

// maxCachedIndexes bounds the cache; releases list at most a few
// thousand files, and a full cache simply starts over.
const maxCachedIndexes = 4096

func (c *indexCache) decode(key string, raw []byte) (*fileIndex, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && bytes.Equal(e.raw, raw) {
		c.mu.Unlock()
		return e.fi, nil
	}
	c.mu.Unlock()
	fi := new(fileIndex)
	if err := json.Unmarshal(raw, fi); err != nil {
		return nil, fmt.Errorf("release file index %q: %w", key, err)
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxCachedIndexes {
		c.entries = map[string]cachedIndex{}
	}
	// raw is the store's own copy of the record (bucketFiles is
	// store.Remembered): kept as it is, the next read of the unchanged
	// record returns the same slice, which bytes.Equal compares by
	// identity instead of over a large index's 43 KB.
	c.entries[key] = cachedIndex{raw: raw, fi: fi}
	c.mu.Unlock()
	return fi, nil
}
