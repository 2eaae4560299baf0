package releaseset

import "stratum/store"

// bucketRecords holds each node's release record, keyed by node id.
var bucketRecords = store.NewBucket[Stored]("release-records")
