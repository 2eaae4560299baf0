package releaseset

import (
	"stratum/apierr"
	"stratum/strictjson"
)

// DecodeRecordRequest parses and checks a record request. Every problem is
// reported at once as INVALID_INPUT with its field path (e.g.
// release.pins[2].state). The returned Release has a zero RecordedAt for
// the caller to stamp (a node's recordedAt is accepted and never read).
// Body size is the HTTP layer's concern.
func DecodeRecordRequest(body []byte) (RecordRequest, error) {
	// Release is a pointer on the wire only, to tell a missing record
	// from an empty one.
	var wire struct {
		RunningRelease string  `json:"runningRelease"`
		Release        *Record `json:"release"`
	}
	var req RecordRequest
	err := strictjson.DecodeChecked(body, &wire, "the release record is not valid; see fields", func() apierr.Fields {
		var checks apierr.Fields
		if wire.Release == nil {
			checks.Add("release", "is required")
			return checks
		}
		req = RecordRequest{RunningRelease: wire.RunningRelease, Release: *wire.Release}
		validateRequest(&checks, &req)
		return checks
	})
	if err != nil {
		return RecordRequest{}, err
	}
	return req, nil
}
