package releaseset

import "stratum/store"

// bucketRecords holds each node's release record, keyed by node id, in
// the compact form of stored.go.
var bucketRecords = store.NewRawBucket("release-records")
