package repo

import "stratum/store"

// Store buckets of this package. A release's record is small; each file's
// chunk index has its own key so serving one file reads only its index.
var (
	bucketReleases = store.NewBucket[Imported]("releases")           // release -> Imported
	bucketFiles    = store.NewBucket[fileIndex]("release-files")     // release NUL path -> fileIndex
	bucketCorrupt  = store.NewBucket[corruptMark]("release-corrupt") // release NUL path -> corruptMark
	bucketSubs     = store.NewBucket[subIndex]("release-subchunks")  // release NUL path -> subIndex
	// bucketContent holds file content in a shared store (shared.go):
	// import id NUL path NUL chunk number (8 bytes, big-endian) -> chunk.
	bucketContent = store.NewBucket[[]byte]("release-content")
)
