package repo

import (
	"stratum/store"
	"stratum/wire"
)

// Store buckets of this package. A release's record is small; each file's
// chunk index has its own key so serving one file reads only its index.
// The catalog and the chunk indexes decide what nodes receive, so their
// records are authenticated (SPEC 16.2). Both are read on every request
// for a file (Stat), so their MAC is checked once per stored version
// (store.Remembered): a 1 GiB file's index holds 1,024 chunk hashes.
var (
	bucketReleases = store.NewBucket[wire.ImportedRelease]("releases", store.Authenticated(), store.Remembered()) // release -> Imported
	// bucketFiles holds each file's JSON fileIndex, decoded through the
	// index cache (indexcache.go), hence raw.
	bucketFiles   = store.NewRawBucket("release-files", store.Authenticated(), store.Remembered()) // release NUL path -> fileIndex
	bucketCorrupt = store.NewBucket[corruptMark]("release-corrupt")                                // release NUL path -> corruptMark
	bucketSubs    = store.NewRawBucket("release-subchunks")                                        // release NUL path -> subIndex
	// bucketContent holds file content in a shared store (shared.go):
	// import id NUL path NUL chunk number (8 bytes, big-endian) -> chunk.
	bucketContent = store.NewRawBucket("release-content")
	// bucketImports marks the imports whose content is being stored
	// (import id -> importMark): what a killed import leaves, for
	// CollectOrphans.
	bucketImports = store.NewBucket[importMark]("release-imports")
	// bucketKeys makes a key file of DIR/release-keys count (keys.go):
	// key id -> trustedKey, and keysAdoptedMark once the files found
	// there were adopted.
	bucketKeys = store.NewBucket[trustedKey]("release-keys", store.Authenticated())
)
