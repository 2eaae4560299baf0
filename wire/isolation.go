package wire

import "time"

// Isolation is what a founder restored from a backup says until an
// operator takes it over (`stratum takeover`): it probes no node,
// contacts no OpenBao and answers no node or joiner. GET /version names
// it to an authenticated caller; the console shows it as a banner.
type Isolation struct {
	RestoredAt time.Time `json:"restoredAt"`
	// Backup is the backup file's name.
	Backup string `json:"backup"`
	// Message says what isolation means and the command that ends it.
	Message string `json:"message"`
}
