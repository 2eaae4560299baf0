package wire

import (
	"encoding/json"
	"time"
)

// The identity API's shapes (/v1/auth, /v1/iam).

// Policy is an identity policy document.
type Policy struct {
	Version   string      `json:"version"`
	Statement []Statement `json:"statement"`
}

// Statement is one allow or deny rule.
type Statement struct {
	Effect   string   `json:"effect"`
	Action   []string `json:"action"`
	Resource []string `json:"resource"`
}

// TokenView is a token as listed: no hash, no secret.
type TokenView struct {
	ID        string    `json:"tokenId"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Subject   string    `json:"subject"`
	Policy    Policy    `json:"policy"`
	Parent    string    `json:"parent,omitempty"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	Revoked   bool      `json:"revoked"`
}

// SignInHint is GET /v1/auth/sign-in, asked before any login: what the
// console's sign-in page may tell a person. BootstrapCredentials is true
// while the founder's data directory holds bootstrap-credentials.txt, the
// bootstrap admin's generated password, which goes once that password
// is changed.
type SignInHint struct {
	BootstrapCredentials bool `json:"bootstrapCredentials"`
}

// CreateTokenRequest is the body of POST /v1/iam/tokens.
type CreateTokenRequest struct {
	Name   string          `json:"name"`
	TTL    string          `json:"ttl"`
	Policy json.RawMessage `json:"policy"`
}

// PasswordChange is the body of POST /v1/auth/password.
type PasswordChange struct {
	CurrentPassword string `json:"currentPassword"`
	NewPassword     string `json:"newPassword"`
}
