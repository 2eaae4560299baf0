package releaseset

import (
	"stratum/apierr"
	"stratum/strictjson"
	"stratum/wire"
)

// DecodeRecordRequest parses and checks a record request. Every problem is
// reported at once as INVALID_INPUT with its field path (e.g.
// release.pins[2].state). The returned Release has a zero RecordedAt for
// the caller to stamp (a node's recordedAt is accepted and never read).
// Body size is the HTTP layer's concern.
func DecodeRecordRequest(body []byte) (wire.RecordRequest, error) {
	// Release is a pointer on the wire only, to tell a missing record
	// from an empty one.
	var in struct {
		RunningRelease string       `json:"runningRelease"`
		Release        *wire.Record `json:"release"`
	}
	var req wire.RecordRequest
	err := strictjson.DecodeChecked(body, &in, "the release record is not valid; see fields", func() apierr.Fields {
		var checks apierr.Fields
		if in.Release == nil {
			checks.Add("release", "is required")
			return checks
		}
		req = wire.RecordRequest{RunningRelease: in.RunningRelease, Release: *in.Release}
		validateRequest(&checks, &req)
		return checks
	})
	if err != nil {
		return wire.RecordRequest{}, err
	}
	return req, nil
}
