package releaseset

import (
	"bytes"

	"stratum/apierr"
	"stratum/strictjson"
	"stratum/wire"
)

// Request is a decoded record request. When its body held the release
// exactly as the release set encodes it (encodeRelease; an agent's
// json.Marshal writes it so), the record is not encoded again: its
// encoding is taken from the body, around the founder's recordedAt.
type Request struct {
	wire.RecordRequest
	// tail is the release's encoding after its recordedAt value
	// (`,"hostReportedAt":…}`), nil when the body does not hold it. It
	// points into the body: valid while the body is.
	tail []byte
}

// DecodeRecordRequest parses and checks a record request. Every problem is
// reported at once as INVALID_INPUT with its field path (e.g.
// release.pins[2].state). The returned Release has a zero RecordedAt for
// the caller to stamp (a node's recordedAt is accepted and never read);
// what RecordDecoded can take from the body is kept (Request). Body size
// is the HTTP layer's concern.
func DecodeRecordRequest(body []byte) (Request, error) {
	// Release is a pointer on the wire only, to tell a missing record
	// from an empty one.
	var in struct {
		RunningRelease string       `json:"runningRelease"`
		Release        *wire.Record `json:"release"`
	}
	var req wire.RecordRequest
	canon, err := strictjson.DecodeCheckedCanonical(body, &in, "the release record is not valid; see fields", func() apierr.Fields {
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
		return Request{}, err
	}
	r := Request{RecordRequest: req}
	if canon.OK && len(canon.Ignored) == 1 {
		r.tail = releaseTail(body, canon.Ignored[0])
	}
	return r, nil
}

// releaseTail is the release's encoding after its recordedAt value, which
// is at: the body is canonical (strictjson.Canonical), so it is
// {"runningRelease":…,"release":{"recordedAt":…,…}} (white space after
// it aside), recordedAt being a record's first field and its only
// ignored one. Nil when the body is not so.
func releaseTail(body []byte, at [2]int) []byte {
	const key = `,"release":{"recordedAt":`
	end := bytes.LastIndexByte(body, '}') // the request's own
	if at[0] < len(key) || string(body[at[0]-len(key):at[0]]) != key || end <= at[1] {
		return nil
	}
	tail := body[at[1]:end]
	if len(tail) < 2 || tail[0] != ',' || tail[len(tail)-1] != '}' {
		return nil
	}
	return tail
}

// appendPlain appends rec's encoding (encodeRelease's) to dst, from
// tail when it is not nil.
func appendPlain(dst []byte, rec *wire.Record, tail []byte) ([]byte, error) {
	if tail == nil {
		return encodeRelease(dst, rec)
	}
	at, err := rec.RecordedAt.MarshalJSON()
	if err != nil {
		return encodeRelease(dst, rec)
	}
	dst = append(dst, `{"recordedAt":`...)
	dst = append(dst, at...)
	return append(dst, tail...), nil
}
