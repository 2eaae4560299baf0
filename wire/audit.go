package wire

import "time"

// The audit log's shapes (GET /v1/admin/audit, /v1/admin/audit/verify,
// stratum audit verify).

// AuditEvent is one state change. Data never holds a secret.
type AuditEvent struct {
	Seq     uint64            `json:"seq"`
	Time    time.Time         `json:"time"`
	Kind    string            `json:"kind"`
	Actor   string            `json:"actor,omitempty"`
	Subject string            `json:"subject,omitempty"`
	Data    map[string]string `json:"data,omitempty"`
	// Prev is the HMAC-SHA256, under a key derived from the data key, of
	// the previous event's stored bytes (zeros for the first event): an
	// attacker with the file but not the key can neither edit an event
	// nor recompute the links after it.
	Prev string `json:"prev"`
}

// AuditVerdict is what a walk of the whole chain found.
type AuditVerdict struct {
	Intact bool `json:"intact"`
	// Events is the number of events walked (the good ones before a break).
	Events int `json:"events"`
	// Problem names the first broken link (sequence numbers, no content),
	// or every record whose MAC fails.
	Problem string `json:"problem,omitempty"`
}
