package releaseset_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"stratum/apierr"
	"stratum/releaseset"
	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// FuzzDecodeRecordRequest: no body panics the decoder; a refusal is always
// INVALID_INPUT with at least one field; an accepted request re-encodes to
// a body that decodes to the same value.
func FuzzDecodeRecordRequest(f *testing.F) {
	f.Add(releaseset.SeedRecordBody(f))
	for v := range 3 {
		b, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(v, v)})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"release":{}}`, `{"release":null}`, `{"runningRelease":"1.0.0-rc.1","release":{"imageMode":true}}`,
		`{"release":{"pins":[{"name":"a","state":"differs","containers":-1}]}}`,
		`{"release":{"hostReportedAt":"0000-01-01T00:00:00+01:00"}}`,
		`{"release":{"hostReportedAt":"2026-07-01T12:00:00.123456789+05:30"}}`,
		`{"release":{"os":{"kernel":"\ud800"}}}`,
		`{"release":{"bootc":{"booted":{"image":"x","digest":"sha256:` + releasesettest.Hex("x") + `"}}},"release":{}}`,
		`{"release":{"controlPlane":{"schemaLevel":1e3}}}`,
		`{"release":{"stored":{"releases":[{"release":"0.2.0","complete":true,"path":"releases/0.2.0"}]}}}`,
		`{"release":{"stored":{"releases":[]}}}`, `{"release":{"extensions":[],"pins":[]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := releaseset.DecodeRecordRequest(body)
		if err != nil {
			e, ok := apierr.As(err)
			if !ok || e.Code != apierr.InvalidInput || len(e.Fields) == 0 {
				t.Fatalf("refusal %v is not INVALID_INPUT with fields", err)
			}
			return
		}
		again, err := json.Marshal(req.RecordRequest)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := releaseset.DecodeRecordRequest(again)
		if err != nil {
			t.Fatalf("re-encoded body %s refused: %v", again, err)
		}
		if !reflect.DeepEqual(req.RecordRequest, back.RecordRequest) {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", req, back)
		}
	})
}
