// Package audit reads the founder's hash-chained audit log: pages of
// events and the chain's verdict. The chain itself (writing, keying,
// linking) is the store's.
package audit

import (
	"errors"

	"stratum/store"
)

// Config configures a Reader.
type Config struct {
	DB *store.DB
}

// Reader reads the audit log, built like the other domain services.
type Reader struct {
	cfg Config
}

// New builds a Reader.
func New(cfg Config) *Reader { return &Reader{cfg: cfg} }

// Events returns up to limit events after sequence number after.
func (r *Reader) Events(after uint64, limit int) ([]store.AuditEvent, error) {
	return r.cfg.DB.AuditEvents(after, limit)
}

// Verdict is what a walk of the whole chain found.
type Verdict struct {
	Intact bool `json:"intact"`
	// Events is the number of events walked (the good ones before a break).
	Events int `json:"events"`
	// Problem names the first broken link (sequence numbers, no content).
	Problem string `json:"problem,omitempty"`
}

// Verify walks the whole chain. A broken chain is a finding, not a
// failure: the error is only for a store that cannot be read (closed).
func (r *Reader) Verify() (Verdict, error) {
	n, err := r.cfg.DB.VerifyAudit()
	if errors.Is(err, store.ErrClosed) {
		return Verdict{}, err
	}
	v := Verdict{Intact: err == nil, Events: n}
	if err != nil {
		v.Problem = err.Error()
	}
	return v, nil
}
