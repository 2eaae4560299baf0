package join

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"

	"stratum/apierr"
	"stratum/wire"
)

// The join decoders read request bodies from the network (the joiner's
// registration and progress, the operator's approve/reject/cancel and
// token bodies, a node's applied report). Each target checks: no panic; a
// refusal is INVALID_INPUT naming at least one field; an accepted value
// has no problems left and survives a re-encode unchanged. Seed corpora
// are in testdata/fuzz/<Name>/.

func wantInvalidInput(t *testing.T, err error) {
	t.Helper()
	e, ok := apierr.As(err)
	if !ok || e.Code != apierr.InvalidInput || len(e.Fields) == 0 {
		t.Fatalf("refusal %v (%T) is not INVALID_INPUT with fields", err, err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	return b
}

func FuzzDecodeRegisterRequest(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"token":1}`,
		`{"token":"sjt1.abc","release":"0.6.0","hostname":"node-1.lab","mgmtIp":"10.0.0.5","machineId":"abc","facts":{"cpus":4}}`,
		`{"token":"t","release":"v1.2.3-rc.1+b","selfUpgrade":true,"hostname":"h","facts":null}`,
		`{"token":"t","release":"0.6.0","hostname":"h","mgmtIp":"::ffff:10.0.0.1","facts":[]}`,
		`{"token":"t","release":"0.6.0","hostname":"h","facts":{"a":"\ud800"}}`,
		`{"token":"t","release":"0.6.0","hostname":"h","token":"u"}`,
		`{"token":"t","release":"01.2.3","hostname":"-h","machineId":"\u0001","bogus":1}`,
		`{"token":"t","release":"0.6.0","hostname":"h","selfUpgrade":"yes","mgmtIp":"fe80::1%eth0"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRegisterRequest(body)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		if p := registerProblems(req); len(p) > 0 {
			t.Fatalf("accepted a request with problems %v", p)
		}
		again := mustMarshal(t, req)
		back, err := DecodeRegisterRequest(again)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		compact := func(r *wire.RegisterRequest) {
			if len(r.Facts) > 0 {
				var b bytes.Buffer
				if err := json.Compact(&b, r.Facts); err != nil {
					t.Fatalf("accepted facts are not JSON: %v", err)
				}
				r.Facts = b.Bytes()
			}
		}
		compact(&req)
		compact(&back)
		if !reflect.DeepEqual(req, back) {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", req, back)
		}
	})
}

func FuzzDecodeAssignment(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, ` `, `{"nodeId":"n-abcd1234"}`,
		`{"nodeId":"n-abcd1234","az":"az-1","mgmtIp":"10.0.0.7","networks":{"storage":{"ip":"10.1.0.7/24","interface":"eth1"}},"labels":{"rack":"r1"}}`,
		`{"networks":{"storage":{"ip":"10.1.0.7","ipp":"x"}}}`,
		`{"networks":{"storage":null}}`, `{"networks":null,"labels":null}`, `{"networks":{"bogus":{}}}`,
		`{"labels":{"a":1}}`, `{"az":"AZ"}`, `{"nodeId":"n-abcd1234","nodeId":"n-abcd1235"}`,
		`{"networks":{"storage":{"ip":"::1"},"tenant":{"ip":"::1"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := DecodeAssignment(body)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		if p := assignmentProblems(a); len(p) > 0 {
			t.Fatalf("accepted an assignment with problems %v", p)
		}
		again := mustMarshal(t, a)
		back, err := DecodeAssignment(again)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		if !reflect.DeepEqual(a, back) {
			t.Fatalf("round trip changed the assignment:\n%+v\n%+v", a, back)
		}
		_ = normalized(a)
	})
}

func FuzzDecodeCreateTokenRequest(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"role":"worker"}`, `{"role":"worker","ttl":"7d","uses":3,"description":"rack 4"}`,
		`{"role":"control-plane","ttl":"1h30m","uses":1000}`, `{"role":"worker","uses":0}`, `{"role":"worker","uses":1.5}`,
		`{"role":"worker","uses":1e3}`, `{"role":"worker","uses":-1}`, `{"role":"worker","ttl":"-1h"}`, `{"role":"worker","ttl":"367d"}`,
		`{"role":"worker","ttl":"720h0m1s"}`, `{"role":"worker","ttl":"+5d"}`, `{"role":"worker","uses":1e300}`,
		`{"role":"worker","description":"\udfff"}`, `{"role":"admin","bogus":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeCreateTokenRequest(body)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		ttl, p := validateTokenRequest(req)
		if len(p) > 0 {
			t.Fatalf("accepted a request with problems %v", p)
		}
		if ttl <= 0 || ttl > maxTokenTTL || req.Uses < 0 || req.Uses > maxTokenUses {
			t.Fatalf("accepted ttl %v uses %d", ttl, req.Uses)
		}
		// Uses 0 is "absent"; an explicit 0 is refused, so re-encode without it.
		m := map[string]any{"role": req.Role, "ttl": req.TTL, "description": req.Description}
		if req.Uses != 0 {
			m["uses"] = req.Uses
		}
		again := mustMarshal(t, m)
		back, err := DecodeCreateTokenRequest(again)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		if req != back {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", req, back)
		}
	})
}

func FuzzDecodeProgress(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"phase":"installing"}`, `{"phase":"done","message":"ok"}`, `{"phase":"failed","message":"disk full"}`,
		`{"phase":"Done"}`, `{"phase":"failed","message":"\ud800"}`, `{"phase":"done","phase":"failed"}`, `{"phase":1}`, `{"phase":"done","x":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeProgress(body)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		if p := progressProblems(req); len(p) > 0 || !utf8.ValidString(req.Message) {
			t.Fatalf("accepted a report with problems %v", p)
		}
		back, err := DecodeProgress(mustMarshal(t, req))
		if err != nil || back != req {
			t.Fatalf("round trip: %+v -> %+v (%v)", req, back, err)
		}
	})
}

func FuzzDecodeReason(f *testing.F) {
	for _, s := range []string{``, `{}`, `null`, `{"reason":"wrong rack"}`, `{"reason":""}`, `{"reason":null}`, `{"reason":"\ud800"}`, `{"reason":1}`, `{"why":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reason, err := DecodeReason(body)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		if len(reason) > maxReasonSize || !utf8.ValidString(reason) {
			t.Fatalf("accepted reason of %d bytes, valid UTF-8 %v", len(reason), utf8.ValidString(reason))
		}
		back, err := DecodeReason(mustMarshal(t, map[string]string{"reason": reason}))
		if err != nil || back != reason {
			t.Fatalf("round trip: %q -> %q (%v)", reason, back, err)
		}
	})
}

func FuzzDecodeApplied(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"generation":1}`, `{"generation":0}`, `{"generation":-1}`, `{"generation":1.5}`, `{"generation":9007199254740992}`,
		`{"generation":9007199254740993}`, `{"generation":1e300}`, `{"generation":"1"}`, `{"generation":2,"generation":3}`, `{"generation":1e0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := DecodeApplied(body)
		if err != nil {
			wantInvalidInput(t, err)
			return
		}
		if g < 1 || g > 1<<53 {
			t.Fatalf("accepted generation %d", g)
		}
		back, err := DecodeApplied([]byte(`{"generation":` + strconv.FormatUint(g, 10) + `}`))
		if err != nil || back != g {
			t.Fatalf("round trip: %d -> %d (%v)", g, back, err)
		}
	})
}
