package iam

import "stratum/store"

// Buckets this package owns; who may do what hangs on both. Every
// authenticated request reads its token and its user: both are
// Remembered, so the same record read again costs a comparison, not an
// HMAC (a record changed in any byte is checked again).
var (
	bucketUsers  = store.NewBucket[User]("iam-users", store.Authenticated(), store.Remembered())   // email -> User
	bucketTokens = store.NewBucket[Token]("iam-tokens", store.Authenticated(), store.Remembered()) // token id -> Token (API tokens and login sessions)
)

var _ = store.Provide(store.StepIAMTokenCreators, migrateTokens)
