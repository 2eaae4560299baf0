package join

import "stratum/store"

// Buckets this package owns. The queue and the turn are kept as their own
// small indexes so a view never scans every registration to learn its
// queue position (10,000s of waiters read views).
var (
	bucketTokens        = store.NewBucket[tokenRecord]("join-tokens")
	bucketRegistrations = store.NewBucket[record]("join-registrations")
	bucketKeys          = store.NewBucket[[]byte]("join-keys")       // key pin -> its latest join id (raw)
	bucketQueue         = store.NewBucket[[]byte]("join-queue")      // approval sequence -> join id (raw)
	bucketDeliveries    = store.NewBucket[[]byte]("join-deliveries") // join id -> sealed delivery
	bucketMeta          = store.NewBucket[[]byte]("join-meta")       // keyTurn -> join id (raw)
	// bucketClaims indexes what queued (approved) joins hold: "n/<node
	// id>" and "a/<address>" -> join id, so an approval checks conflicts
	// without decoding every queued join.
	bucketClaims = store.NewBucket[[]byte]("join-claims")
)

func init() {
	store.AddMigration(store.Migration{Version: 5, Name: "index of what queued joins claim", Apply: rebuildClaims})
	store.AddMigration(trustMigration)
}
