package releaseset

import (
	"strings"

	"stratum/apierr"
)

// RecordRequest is the body of PUT /v1/cluster/nodes/{nodeId}/release.
type RecordRequest struct {
	// RunningRelease is the release the node runs (semver), empty when it
	// does not know.
	RunningRelease string `json:"runningRelease"`
	Release        Record `json:"release"`
}

// ignoredPaths are accepted in a body but never read: the founder stamps
// recordedAt on receipt, so what a node sends there does not matter.
var ignoredPaths = map[string]bool{"release.recordedAt": true}

// DecodeRecordRequest parses and checks a record request. Every problem is
// reported at once as INVALID_INPUT with its field path (e.g.
// release.pins[2].state). The returned Release has a zero RecordedAt for
// the caller to stamp. Body size is the HTTP layer's concern.
func DecodeRecordRequest(body []byte) (RecordRequest, error) {
	var req RecordRequest
	raw, err := parseJSON(body)
	if err != nil {
		f := apierr.Fields{{Field: "", Message: err.Error()}}
		return RecordRequest{}, f.Err("the request body is not valid JSON")
	}
	d := strictDecoder{ignore: ignoredPaths}
	d.fillStruct(raw, reflectValue(&req), "")
	if m, ok := raw.(map[string]any); ok && m["release"] == nil {
		d.problems.Add("release", "is required")
	}
	var checks apierr.Fields
	req.validate(&checks)
	problems := capProblems(append(d.problems, withoutCovered(checks, d.problems)...))
	if err := problems.Err("the release record is not valid; see fields"); err != nil {
		return RecordRequest{}, err
	}
	return req, nil
}

// withoutCovered drops value checks at or under a path the decoder already
// faulted: a field of the wrong type is left zero, and "is required" on
// top of "must be a string" would only be noise. It looks up each prefix
// of a check's path, so a body with many problems stays cheap.
func withoutCovered(checks, decoded apierr.Fields) apierr.Fields {
	if len(decoded) == 0 {
		return checks
	}
	faulted := make(map[string]bool, len(decoded))
	for _, p := range decoded {
		faulted[p.Field] = true
	}
	var out apierr.Fields
	for _, c := range checks {
		if !faulted[""] && !coveredBy(c.Field, faulted) {
			out = append(out, c)
		}
	}
	return out
}

// coveredBy reports whether path or one of its parents is in faulted.
func coveredBy(path string, faulted map[string]bool) bool {
	for {
		if faulted[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return false
		}
		path = path[:i]
	}
}

// maxProblems bounds the list: a 4 MiB body of bad elements would
// otherwise answer with hundreds of thousands of entries.
const maxProblems = 1000

// capProblems keeps the first maxProblems and says how many were left out.
func capProblems(f apierr.Fields) apierr.Fields {
	if len(f) <= maxProblems {
		return f
	}
	more := len(f) - maxProblems
	out := append(apierr.Fields(nil), f[:maxProblems]...)
	out.Add("", "%d more problems not listed", more)
	return out
}
