// Package join is the founder's join domain: join tokens, registrations
// and their state machine, turns, deliveries, membership progress and the
// long-poll hub that wakes waiting joiners.
//
// It knows no HTTP: every method takes decoded values and returns views or
// an *apierr.Error. Every state change runs in one store transaction with
// its audit event, so a request that fails changes nothing, and waiters
// are woken only from the OnCommit hook of the transaction that changed
// what they watch.
package join
