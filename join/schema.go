package join

import "stratum/store"

// Buckets this package owns. The queue and the turn are kept as their own
// small indexes so a view never scans every registration to learn its
// queue position (10,000s of waiters read views). Each decides who is
// admitted, so each record is authenticated (SPEC 16.2); deliveries are
// sealed, which authenticates them.
var (
	bucketTokens = store.NewBucket[tokenRecord]("join-tokens", store.Authenticated())
	// Join ids lead with their sequence number (newJoinID).
	bucketRegistrations = store.NewBucket[record]("join-registrations", store.Authenticated(), store.Appended())
	bucketKeys          = store.NewRawBucket("join-keys", store.Authenticated())  // key pin -> its latest join id
	bucketQueue         = store.NewRawBucket("join-queue", store.Authenticated()) // approval sequence -> join id
	bucketDeliveries    = store.NewRawBucket("join-deliveries")                   // join id -> sealed delivery
	bucketMeta          = store.NewRawBucket("join-meta", store.Authenticated())  // keyTurn -> join id
	// bucketClaims indexes what queued (approved) joins hold: "n/<node
	// id>" and "a/<address>" -> join id, so an approval checks conflicts
	// without decoding every queued join.
	bucketClaims = store.NewRawBucket("join-claims", store.Authenticated())
	// bucketInventory holds the inventory of expected machines, each
	// entry under its match key (matchKey): a registration finds its
	// entry with one read. Entries approve joins, so they are
	// authenticated, and so is the document's metadata.
	bucketInventory     = store.NewBucket[inventoryRecord]("inventory", store.Authenticated())
	bucketInventoryMeta = store.NewRawBucket("inventory-meta", store.Authenticated())

	inventoryMeta = store.NewField[inventoryMetaRecord](bucketInventoryMeta, "meta")
)

var _ = store.Provide(store.StepJoinClaims, rebuildClaims)
