package wire

import "time"

// LoginRequest is the body of POST /v1/auth/login.
type LoginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// LoginResponse is its answer: a started session.
type LoginResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	// MustChangePassword: the session may only change the password (or
	// log out) until it does (SPEC 16.1).
	MustChangePassword bool `json:"mustChangePassword,omitempty"`
}
