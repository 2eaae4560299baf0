package joiner

import (
	"errors"
	"net/url"
	"strings"

	"stratum/apierr"
)

// registrationPath is /v1/join/registrations/{joinId}.
func registrationPath(joinID string) string {
	return "/v1/join/registrations/" + url.PathEscape(joinID)
}

// escapePath escapes each segment of a release path (already a clean
// relative path: the manifest was validated), keeping the slashes.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func queryEscape(s string) string { return url.QueryEscape(s) }

// isNotFound reports a 404 NOT_FOUND from the founder.
func isNotFound(err error) bool {
	var re *remoteError
	return errors.As(err, &re) && re.status == 404
}

// registerError adds the way out to a refused token. (A RELEASE_MISMATCH
// already says what to do in the founder's message.)
func registerError(err error) error {
	e, ok := apierr.As(err)
	if !ok {
		return err
	}
	if e.Code == apierr.JoinTokenInvalid {
		return errorWithHint(err, "ask the operator for a new join token (stratum token create)")
	}
	return err
}

type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + "; " + h.hint }
func (h *hinted) Unwrap() error { return h.err }

func errorWithHint(err error, hint string) error { return &hinted{err: err, hint: hint} }
