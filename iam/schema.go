package iam

import "stratum/store"

// Buckets this package owns.
var (
	bucketUsers  = store.NewBucket[User]("iam-users")   // email -> User
	bucketTokens = store.NewBucket[Token]("iam-tokens") // token id -> Token (API tokens and login sessions)
)

func init() {
	store.AddMigration(store.Migration{Version: 8, Name: "API tokens record their creator", Apply: migrateTokens})
}
