package cluster

import "stratum/store"

// Buckets this package owns.
var (
	bucketCluster = store.NewBucket[[]byte]("cluster") // identity, CA certificate
	bucketSecrets = store.NewBucket[[]byte]("secrets") // sealed: CA key, cluster passwords
	bucketMembers = store.NewBucket[[]byte]("members") // member id -> Member; keyGeneration
	// bucketMemberOrder only carries the sequence of member order numbers.
	bucketMemberOrder = store.NewBucket[[]byte]("members-order")
)
