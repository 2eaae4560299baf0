package iam

import "stratum/store"

// Buckets this package owns; who may do what hangs on both.
var (
	bucketUsers  = store.NewBucket[User]("iam-users", store.Authenticated())   // email -> User
	bucketTokens = store.NewBucket[Token]("iam-tokens", store.Authenticated()) // token id -> Token (API tokens and login sessions)
)

var _ = store.Provide(store.StepIAMTokenCreators, migrateTokens)
