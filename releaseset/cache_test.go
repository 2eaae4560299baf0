package releaseset

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unsafe"

	"stratum/releaseset/releasesettest"
	"stratum/wire"
)

// TestStoredRoundTrips: the stored record Record makes from the cache's
// frame reads back as the record it was made of, whether or not the
// record holds characters json.Marshal escapes for HTML.
func TestStoredRoundTrips(t *testing.T) {
	seed, err := DecodeRecordRequest(seedRecordBody(t))
	if err != nil {
		t.Fatal(err)
	}
	html := releasesettest.Record(4, 2)
	html.OS.PrettyName = `Stratum <OS> & "friends" é \u2028`
	cases := []struct {
		name string
		st   Stored
	}{
		{"seed", Stored{RunningRelease: seed.RunningRelease, Release: seed.Release}},
		{"synthetic 0", Stored{RunningRelease: "0.2.0", Release: releasesettest.Record(0, 0)}},
		{"synthetic older", Stored{RunningRelease: "0.1.0", Release: releasesettest.Record(1, 1)}},
		{"synthetic drift", Stored{RunningRelease: "0.2.0", Release: releasesettest.Record(2, 2)}},
		{"html in the record", Stored{RunningRelease: "0.2.0", Release: html}},
		{"html in the running release", Stored{RunningRelease: "0.2.0<&>\"", Release: releasesettest.Record(3, 0)}},
		{"empty", Stored{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkStored(t, c.st)
		})
	}
}

func checkStored(t *testing.T, st Stored) {
	t.Helper()
	var s Service
	c, raw, err := s.keep("n-1", st, 0, []byte{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkReadsBack(t, raw, st)
	if c.plain == 0 || len(c.release) == 0 {
		t.Fatalf("nothing kept: %+v", c)
	}
	// The same record in a body, as an agent sends it: what is stored
	// and kept is the same whether it is taken from the body or encoded.
	body, err := json.Marshal(wire.RecordRequest{RunningRelease: st.RunningRelease, Release: st.Release})
	if err != nil {
		t.Fatal(err)
	}
	checkTakenFromBody(t, body, st.Release.RecordedAt)
}

// checkTakenFromBody: body's record, stamped at, is stored and kept as
// it is encoded, whether Record takes it from the body or not; it
// reports whether it took it.
func checkTakenFromBody(t *testing.T, body []byte, at time.Time) bool {
	t.Helper()
	r, err := DecodeRecordRequest(body)
	if err != nil {
		return false // a record the fuzzer made invalid
	}
	st := Stored{RunningRelease: r.RunningRelease, Release: r.Release}
	st.Release.RecordedAt = at
	wantPlain, err := encodeRelease(nil, &st.Release)
	if err != nil {
		t.Fatal(err)
	}
	var s Service
	c, raw, err := s.keep("n-1", st, 0, []byte{}, r.tail)
	if err != nil {
		t.Fatal(err)
	}
	checkReadsBack(t, raw, st)
	plain, err := s.appendRelease(nil, c)
	if err != nil || !bytes.Equal(plain, wantPlain) {
		t.Fatalf("kept release (tail %v) differs from its encoding (%v):\n got %.300s\nwant %.300s", r.tail != nil, err, plain, wantPlain)
	}
	return r.tail != nil
}

// checkReadsBack: raw, a stored record, is compact, leads with st's running
// release and reads back as st.
func checkReadsBack(t *testing.T, raw []byte, st Stored) {
	t.Helper()
	if running, _, ok := splitStored(raw); !ok || running != st.RunningRelease {
		t.Fatalf("stored record leads with %q (compact %v), want %q", running, ok, st.RunningRelease)
	}
	got, err := DecodeStored(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Compared as JSON reads them both: a string that is not UTF-8 (the
	// fuzzer's; a decoded request holds none) reads as U+FFFD, as an 11 KB
	// JSON record read back too, while the compact record keeps the
	// running release's bytes as they were.
	if g, w := jsonRead(t, got), jsonRead(t, st); !bytes.Equal(g, w) {
		t.Fatalf("stored record reads back otherwise:\n got %.300s\nwant %.300s", g, w)
	}
}

// jsonRead is st's JSON as JSON reads it back and writes it again.
func jsonRead(t *testing.T, st Stored) []byte {
	t.Helper()
	var back Stored
	if err := json.Unmarshal(mustMarshal(t, st), &back); err != nil {
		t.Fatal(err)
	}
	return mustMarshal(t, back)
}

// TestRecordTakenFromBody: an agent's record body is not encoded again:
// its encoding is taken from the body around the founder's recordedAt,
// and is what encoding it gives; a body written otherwise (indented,
// keys out of order, an empty list that decodes to none) is encoded.
func TestRecordTakenFromBody(t *testing.T) {
	at := time.Date(2026, 12, 1, 22, 16, 49, 123456789, time.UTC)
	for i := range 6 {
		body, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(i, i)})
		if err != nil {
			t.Fatal(err)
		}
		if !checkTakenFromBody(t, body, at) {
			t.Fatalf("record %d: an agent's body was not taken", i)
		}
		if !checkTakenFromBody(t, append(body, '\n'), at.Add(time.Second).Truncate(time.Second)) {
			t.Fatalf("record %d: a body with a newline after it was not taken", i)
		}
		indented, err := json.MarshalIndent(wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(i, i)}, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if checkTakenFromBody(t, indented, at) {
			t.Fatalf("record %d: an indented body was taken as it is", i)
		}
	}
	rec := releasesettest.Record(1, 0)
	rec.Extensions = []wire.Extension{}
	body, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: rec})
	if err != nil {
		t.Fatal(err)
	}
	if !checkTakenFromBody(t, body, at) {
		t.Fatal(`a body with "extensions":[] (a collector that ran and found none) was not taken as it is`)
	}
	if !bytes.Contains(body, []byte(`"extensions":[]`)) {
		t.Fatalf("the agent's body %.200s has no empty extensions", body)
	}
	swapped := []byte(`{"release":{"recordedAt":"0001-01-01T00:00:00Z","hostReportedAt":null,"imageMode":false,"extensions":null,"stored":null},"runningRelease":"0.2.0"}`)
	if checkTakenFromBody(t, swapped, at) {
		t.Fatal("a body with its keys out of order was taken as it is")
	}
}

// FuzzStoredRecord: whatever strings a record carries, the stored record
// reads back as it.
func FuzzStoredRecord(f *testing.F) {
	f.Add("0.2.0", "Stratum OS 0.2.0", "host-1")
	f.Add("0.2.0<", "a & b", "\u2028")
	f.Add("\"", "\xff", "<script>")
	f.Fuzz(func(t *testing.T, running, pretty, hostname string) {
		rec := releasesettest.Record(5, 0)
		rec.OS.PrettyName = pretty
		rec.Pins = append(rec.Pins, wire.Pin{Name: hostname, Running: pretty + hostname})
		checkStored(t, Stored{RunningRelease: running, Release: rec})
	})
}

// TestKeptRecordHoldsNoPartOfItsBody: the strings of a decoded request
// are parts of one copy of its body (strictjson.DecodeCheckedCanonical);
// what the cache keeps of a record (its facts, drift findings included,
// and its running release) are copies, so 100,000 kept records do not
// hold 100,000 bodies.
func TestKeptRecordHoldsNoPartOfItsBody(t *testing.T) {
	body, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(13, 2)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRecordRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	// The decoded strings are parts of one copy of the body: the copy
	// starts where the running release's value lies in the body before it.
	at := bytes.Index(body, []byte(`"0.2.0"`)) + 1
	start := uintptr(unsafe.Pointer(unsafe.StringData(r.RunningRelease))) - uintptr(at)
	inBody := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return s != "" && p >= start && p < start+uintptr(len(body))
	}
	if !inBody(r.Release.OS.PrettyName) || r.Release.OS.PrettyName != string(body[uintptr(unsafe.Pointer(unsafe.StringData(r.Release.OS.PrettyName)))-start:][:len(r.Release.OS.PrettyName)]) {
		t.Fatal("the decoded strings are not parts of one copy of the body: the test would prove nothing")
	}
	var s Service
	st := Stored{RunningRelease: r.RunningRelease, Release: r.Release}
	c, _, err := s.keep("n-13", st, 0, []byte{}, r.tail)
	if err != nil {
		t.Fatal(err)
	}
	kept := []string{c.running}
	for _, v := range c.facts.fixed {
		kept = append(kept, v.value, v.display)
	}
	for _, p := range c.facts.pkgs {
		kept = append(kept, p.component, p.value.value, p.value.display)
	}
	if len(c.facts.drift) == 0 {
		t.Fatal("a variant-2 record has no drift: the test would prove nothing")
	}
	for _, d := range c.facts.drift {
		kept = append(kept, string(d.Source), d.Commit, d.Want, d.Image, d.Digest, d.Version, d.Name, d.Pinned, d.Running)
	}
	for _, k := range kept {
		if inBody(k) {
			t.Errorf("kept %q is part of the request's body", k)
		}
	}
}
