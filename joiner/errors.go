package joiner

import (
	"errors"
	"fmt"
	"strings"

	"stratum/apierr"
)

// Exit codes of `stratum join`. 0 means joined and 2 is a usage error (the
// cli's convention); the two final outcomes other than joined get their own
// codes so a unit file or an installer script can tell "an operator said
// no" from "the join broke" without parsing text. A refused join token
// (used up, expired, revoked, mistyped) is 3 as well, as a refused
// credential is for every other command: the founder said no, and only a
// new token changes that. Every other error (unreachable founder at
// shutdown, a bad release) is 1: running again, after fixing what the
// message names, picks up where the run stopped.
const (
	ExitRejected = 3
	ExitFailed   = 4
)

// Sentinels for the two final outcomes other than joined; errors.Is works
// on every error Run returns for them.
var (
	ErrRejected = errors.New("join rejected")
	ErrFailed   = errors.New("join failed")
)

// ExitCode maps an error returned by Run to the process exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrRejected), apierr.CodeOf(err) == apierr.JoinTokenInvalid:
		return ExitRejected
	case errors.Is(err, ErrFailed):
		return ExitFailed
	case errors.As(err, new(*PinError)), errors.As(err, new(*DowngradeError)):
		// A founder we cannot trust, or an upgrade we must not take, is
		// fatal like a failed join: retrying changes nothing.
		return ExitFailed
	default:
		return 1
	}
}

// outcome is the error for a registration that ended rejected or failed.
type outcome struct {
	sentinel error
	joinID   string
	reason   string
	local    error // the local failure that made us report failed, if any
}

func (o *outcome) Error() string {
	reason := o.reason
	if reason == "" {
		reason = "no reason given"
	}
	if o.local != nil {
		return fmt.Sprintf("%v: %v", o.sentinel, o.local)
	}
	return fmt.Sprintf("%v (join %s): %s", o.sentinel, o.joinID, reason)
}

func (o *outcome) Unwrap() []error {
	if o.local != nil {
		return []error{o.sentinel, o.local}
	}
	return []error{o.sentinel}
}

// PinError is a founder whose certificate chain does not lead to the CA
// named by --ca-pin. It is never retried: no amount of waiting makes an
// impostor (or a typo in the pin) trustworthy.
type PinError struct {
	Want   string
	Reason string
}

func (e *PinError) Error() string {
	return fmt.Sprintf("refusing the founder: %s (--ca-pin %s): either --ca-pin was mistyped or this is not your founder. "+
		"Take the pin from the founder itself: the \"CA pin:\" line `stratum serve` prints, or the join line `stratum token create` prints; never from this connection", e.Reason, e.Want)
}

// DowngradeError is an offered upgrade this machine must not take (SPEC
// 10.4): a release not newer than the one it runs, or one whose signed
// manifest does not list the running release among those it upgrades
// from. No hook runs.
type DowngradeError struct {
	Running      string
	Offered      string
	UpgradesFrom []string
}

func (e *DowngradeError) Error() string {
	if len(e.UpgradesFrom) > 0 {
		return fmt.Sprintf("refusing the upgrade to %s: its signed manifest upgrades only from %s, and this machine runs %s; no upgrade hook was run", e.Offered, strings.Join(e.UpgradesFrom, ", "), e.Running)
	}
	return fmt.Sprintf("refusing the upgrade to %s: this machine runs %s, and an upgrade must be to a newer release; no upgrade hook was run", e.Offered, e.Running)
}
