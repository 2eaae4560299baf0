package joiner

import (
	"errors"
	"net/url"
	"strings"

	"stratum/apiclient"
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
	var re *apiclient.RemoteError
	return errors.As(err, &re) && re.Status == 404
}
