package cluster

import "stratum/store"

// Buckets this package owns.
var (
	// bucketCluster holds values of several kinds under fixed keys:
	// the identity (JSON), the CA certificate (PEM), the admission release
	// and the member key generation (text). Who is admitted hangs on them.
	bucketCluster = store.NewRawBucket("cluster", store.Authenticated())
	bucketSecrets = store.NewRawBucket("secrets") // sealed (the seal authenticates): CA key, cluster passwords
	bucketMembers = store.NewBucket[Member]("members", store.Authenticated())
	// bucketMemberOrder only carries the sequence of member order numbers.
	bucketMemberOrder = store.NewRawBucket("members-order")

	identity = store.NewField[Identity](bucketCluster, keyIdentity)
)

var (
	_ = store.Provide(store.StepClusterAdmissionRelease, migrateAdmissionRelease)
	_ = store.Provide(store.StepClusterMemberTrust, migrateMemberTrust)
)
