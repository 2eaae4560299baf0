package cli

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"stratum/apierr"
)

// describe renders an admin API answer (an *apierr.Error, or a strict
// decoder's *strictjson.Error, a command returned as it came) with its
// field problems for a terminal; other errors, wrapped ones included, say
// what they say.
func describe(err error) error {
	var run runError
	if errors.As(err, &run) {
		err = run.err
	}
	if errors.Unwrap(err) != nil {
		// Wrapped: the wrapper's context (the joiner's "the founder
		// answered 401 JOIN_TOKEN_INVALID: ...") is the message.
		return err
	}
	e, ok := apierr.As(err)
	if !ok {
		return err
	}
	var b strings.Builder
	b.WriteString(e.Message)
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Message)
	}
	for _, i := range e.Issues {
		fmt.Fprintf(&b, "\n  statement %d: %s %s", i.Statement, i.Code, i.Action)
	}
	return fmt.Errorf("%s", b.String())
}

// statusError is an admin API answer that carried no error envelope.
type statusError struct {
	method, path string
	status       int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.status, http.StatusText(e.status))
}

// apiExitCode maps an admin API error to an exit code by its code, or by
// the HTTP status when the answer had no code.
func apiExitCode(err error) (int, bool) {
	if e, ok := apierr.As(err); ok {
		switch e.Code {
		case apierr.Unauthenticated, apierr.Forbidden, apierr.JoinTokenInvalid:
			return ExitAuth, true
		case apierr.NotFound:
			return ExitNotFound, true
		case apierr.Conflict, apierr.JoinApprovalRefused, apierr.ReleaseMismatch:
			return ExitConflict, true
		case apierr.TooManyRequests:
			return ExitRetry, true
		}
		return ExitFailed, true
	}
	var se *statusError
	if errors.As(err, &se) {
		switch se.status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return ExitAuth, true
		case http.StatusNotFound:
			return ExitNotFound, true
		case http.StatusConflict:
			return ExitConflict, true
		case http.StatusTooManyRequests:
			return ExitRetry, true
		}
		return ExitFailed, true
	}
	return 0, false
}
