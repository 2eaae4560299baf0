package releaseset

import (
	"encoding/json"
	"testing"
)

// TestLeadingRunning: where leadingRunning reads the runningRelease
// itself it reads what json.Unmarshal reads, and it leaves every other
// record (another first field, an escape, a control byte, bytes that are
// not UTF-8) to the decoder.
func TestLeadingRunning(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		wantOK bool
	}{
		{`{"RunningRelease":"0.2.0","Release":{"recordedAt":"2026-07-01T12:00:00Z"}}`, true},
		{`{"RunningRelease":"","Release":{}}`, true},
		{`{"RunningRelease":"0.2.0-é","Release":{}}`, true},
		{`{"RunningRelease":"0.\u0032.0","Release":{}}`, false},
		{`{"RunningRelease":"a\"b","Release":{}}`, false},
		{"{\"RunningRelease\":\"a\x01b\",\"Release\":{}}", false},
		{"{\"RunningRelease\":\"a\xffb\",\"Release\":{}}", false},
		{`{"Release":{},"RunningRelease":"0.2.0"}`, false},
		{`{ "RunningRelease":"0.2.0"}`, false},
		{`{"RunningRelease":null}`, false},
		{`{"RunningRelease":"0.2.0`, false},
	} {
		got, ok := leadingRunning([]byte(tc.raw))
		if ok != tc.wantOK {
			t.Errorf("%q: read itself %v, want %v", tc.raw, ok, tc.wantOK)
			continue
		}
		if !ok {
			continue
		}
		var want struct{ RunningRelease string }
		if err := json.Unmarshal([]byte(tc.raw), &want); err != nil {
			t.Fatalf("%q: %v", tc.raw, err)
		}
		if got != want.RunningRelease {
			t.Errorf("%q: read %q, json.Unmarshal reads %q", tc.raw, got, want.RunningRelease)
		}
	}
	// What the service stores (storedJSON, json.Marshal) is read itself.
	st := Stored{RunningRelease: "0.3.0"}
	for _, raw := range [][]byte{mustStoredJSON(t, st), mustMarshal(t, st)} {
		if got, ok := leadingRunning(raw); !ok || got != "0.3.0" {
			t.Errorf("%.60s: read %q, %v; want 0.3.0 read itself", raw, got, ok)
		}
	}
}

func mustStoredJSON(t *testing.T, st Stored) []byte {
	t.Helper()
	plain, err := encodeRelease(nil, &st.Release)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := storedJSON(nil, st, plain)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
