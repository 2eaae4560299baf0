package strictjson_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"stratum/releaseset/releasesettest"
	"stratum/strictjson"
	"stratum/wire"
)

// recordWire is what DecodeRecordRequest decodes (the record is a
// pointer on the wire).
type recordWire struct {
	RunningRelease string       `json:"runningRelease"`
	Release        *wire.Record `json:"release"`
}

// kinds has a field of every kind the fast path decodes.
type kinds struct {
	S   string            `json:"s"`
	Src wire.HostSource   `json:"src,omitempty"`
	B   bool              `json:"b"`
	I   int               `json:"i"`
	I8  int8              `json:"i8"`
	U16 uint16            `json:"u16"`
	U   uint64            `json:"u"`
	F32 float32           `json:"f32"`
	F   float64           `json:"f"`
	T   time.Time         `json:"t"`
	PT  *time.Time        `json:"pt"`
	PB  *bool             `json:"pb"`
	PI  *int              `json:"pi"`
	PS  *kinds            `json:"ps"`
	L   []kinds           `json:"l"`
	LS  []string          `json:"ls"`
	LP  []*int            `json:"lp"`
	LL  [][]int           `json:"ll"`
	Ign map[string]string `json:"ign" strictjson:"ignore"`
	Pay []wire.Payload    `json:"pay,omitempty"`
	un  int
}

// recordBodies are realistic record requests: the fast path's work.
func recordBodies(t testing.TB) [][]byte {
	var out [][]byte
	for i := range 6 {
		b, err := json.Marshal(wire.RecordRequest{RunningRelease: "0.2.0", Release: releasesettest.Record(i, i)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestFastPathTakesRecords: the record bodies agents send are decoded by
// the fast path (else it saves nothing), to the full decoder's value.
func TestFastPathTakesRecords(t *testing.T) {
	for i, b := range recordBodies(t) {
		var fast, full recordWire
		if !strictjson.DecodeFastOnly(b, &fast) {
			t.Fatalf("record %d: the fast path gave up", i)
		}
		if problems, err := strictjson.DecodeFullOnly(b, &full); err != nil || len(problems) > 0 {
			t.Fatalf("record %d: full decoder: %v %v", i, problems, err)
		}
		if !reflect.DeepEqual(fast, full) {
			t.Fatalf("record %d: the paths decode different values", i)
		}
	}
	var k kinds
	if !strictjson.DecodeFastOnly([]byte(`{"s":"a","l":[{"i":1}],"t":"2026-07-01T12:00:00Z","ign":{}}`), &k) {
		t.Fatal("the fast path gave up on a plain document of every kind")
	}
	// An unexported field is no key: the document's "un" is unknown.
	if k := (kinds{}); strictjson.DecodeFastOnly([]byte(`{"un":1}`), &k) || k.un != 0 {
		t.Fatal("the fast path took an unexported field")
	}
}

// FuzzFastPath: whatever the fast path decodes, the full decoder decodes
// to the same value without a problem; what it gives up on is the full
// decoder's (whose problems and messages are its own tests').
func FuzzFastPath(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, ` {"s":"a"} `, `{"s":"\u0061"}`, `{"s":"é"}`, `{"s":"\xff"}`, `{"b":true,"i":-0,"i8":127,"u16":65535,"u":18446744073709551615}`,
		`{"i8":128}`, `{"i":1.0}`, `{"i":1e2}`, `{"f32":3.5e38}`, `{"f32":1e39}`, `{"f":-0.5e-3}`, `{"f":01}`, `{"f":1.}`, `{"f":.5}`,
		`{"t":"2026-07-01T12:00:00+02:00"}`, `{"t":"0000-01-01T00:00:00+01:00"}`, `{"t":"2026-07-01"}`, `{"pt":null,"pb":false,"pi":7}`,
		`{"ps":{"ps":{"s":"x"}},"l":[{},{"s":"y"}],"ls":[],"lp":[1,null,2],"ll":[[1],[],[2,3]]}`,
		`{"ign":{"a":[1,{"b":null}],"a":true},"s":"x"}`, `{"ign":"2026"}`, `{"s":"a","s":"b"}`, `{"s":"a","S":"b"}`, `{"un":1}`,
		`{"s":"a"}x`, `{"s":"a",}`, `{"l":[{},]}`, `{"s" : "a" , "b" : true }`, `{"pay":[{"release":"1","sha256":"x"}]}`, `[]`, `"x"`, `{"l":null,"ls":null}`,
		`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":null,"imageMode":false,"extensions":null,"pins":[{"name":"a","pinned":"","state":"current","containers":-1}],"stored":null}}`,
		`{"runningRelease":"0.2.0","release":{"recordedAt":"0001-01-01T00:00:00Z","hostReportedAt":"2026-07-01T12:00:00.5Z","imageMode":true,"extensions":[{"name":"é"}],"stored":{}}}`,
		`{"src":"os-image","lp":[]}`, "{\"s\":\"a\tb\"}", `{"ign":[[[[[[]]]]]]}`, `{"ign":-}`, `{"ign":tru}`, `{"u":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		compare[kinds](t, b)
		compare[recordWire](t, b)
	})
}

// ignoredAs is how encoding/json writes the (never set) ignored field of
// each fuzzed type: kinds.Ign and a record's recordedAt.
var ignoredAs = map[string]string{"strictjson_test.kinds": `null`, "strictjson_test.recordWire": `"0001-01-01T00:00:00Z"`}

func compare[T any](t *testing.T, b []byte) {
	var fast, full T
	took, canon := strictjson.DecodeFastCanonical(b, &fast)
	if !took {
		var zero T
		if !reflect.DeepEqual(fast, zero) {
			t.Fatalf("%T %q: the fast path gave up and left %+v", fast, b, fast)
		}
		return
	}
	problems, err := strictjson.DecodeFullOnly(b, &full)
	if err != nil || len(problems) > 0 {
		t.Fatalf("%T %q: the fast path took what the full decoder refuses: %v %v", fast, b, problems, err)
	}
	if !reflect.DeepEqual(fast, full) {
		t.Fatalf("%T %q: fast %+v, full %+v", fast, b, fast, full)
	}
	if canon.OK {
		// Canonical: b is the encoding of what was decoded, the
		// ignored fields' values (never set) aside.
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(fast); err != nil {
			t.Fatal(err)
		}
		var got []byte
		at := 0
		for _, span := range canon.Ignored {
			got = append(append(got, b[at:span[0]]...), ignoredAs[fmt.Sprintf("%T", fast)]...)
			at = span[1]
		}
		got = append(got, bytes.TrimRight(b[at:], " \t\r\n")...)
		if string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Fatalf("%T %q: called canonical, but encoding/json writes %q", fast, got, want.String())
		}
	}
}

// TestCanonical: an agent's record body is its own encoding (so the
// release set need not encode it again), and each thing encoding/json
// would write otherwise makes a document not canonical.
func TestCanonical(t *testing.T) {
	for i, b := range recordBodies(t) {
		var r recordWire
		took, canon := strictjson.DecodeFastCanonical(b, &r)
		if !took || !canon.OK || len(canon.Ignored) != 1 {
			t.Fatalf("record %d: fast path %v, canonical %+v", i, took, canon)
		}
		if at := canon.Ignored[0]; !bytes.HasPrefix(b[at[0]-len(`"recordedAt":`):], []byte(`"recordedAt":"`)) {
			t.Fatalf("record %d: ignored value at %v is not recordedAt's", i, at)
		}
	}
	for _, tc := range []struct {
		doc   string
		canon bool
	}{
		{`{"runningRelease":"0.2.0","release":null}`, true},
		{`{"runningRelease":"0.2.0","release":null}` + "\n", true},
		{`{"runningRelease":"é","release":null}`, true},
		{`{"runningRelease":"0.2.0", "release":null}`, false},
		{`{"release":null,"runningRelease":"0.2.0"}`, false},
		{`{"runningRelease":"0.2.0"}`, false},
		{`{"runningRelease":null,"release":null}`, false},
		{`{"runningRelease":"a b","release":null}`, false},
		{`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":null,"imageMode":false,"extensions":null,"stored":null}}`, true},
		{`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":null,"imageMode":false,"extensions":[],"stored":null}}`, true},
		{`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":null,"imageMode":false,"packageManager":"","extensions":null,"stored":null}}`, false},
		{`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":"2026-07-01T12:00:00Z","imageMode":false,"extensions":null,"stored":null}}`, true},
		{`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":"2026-07-01T14:00:00+02:00","imageMode":false,"extensions":null,"stored":null}}`, false},
		{`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":"2026-07-01T12:00:00.500000000Z","imageMode":false,"extensions":null,"stored":null}}`, false},
		{`{"runningRelease":"","release":{"recordedAt":"x","hostReportedAt":null,"imageMode":false,"extensions":null,"pins":[{"name":"a","pinned":"","state":"current","containers":-0}],"stored":null}}`, false},
	} {
		var r recordWire
		took, canon := strictjson.DecodeFastCanonical([]byte(tc.doc), &r)
		if !took || canon.OK != tc.canon {
			t.Errorf("%s: fast path %v, canonical %v; want canonical %v", tc.doc, took, canon.OK, tc.canon)
		}
	}
	var k kinds // floats: encoding/json picks their form
	if _, canon := strictjson.DecodeFastCanonical([]byte(`{"s":"a"}`), &k); canon.OK {
		t.Error("a type with floats called canonical")
	}
}

// TestFastPathMutatedRecords: record bodies with a few bytes changed,
// removed or added (most no longer JSON, or no longer a record), decoded
// by both paths: whatever the fast path takes, the full decoder takes to
// the same value (FuzzFastPath's property on the agents' own bodies, too
// large for the fuzzer to mutate quickly).
func TestFastPathMutatedRecords(t *testing.T) {
	seeds := recordBodies(t)
	seeds = append(seeds, []byte(`{"ps":{"ps":{"s":"x"}},"l":[{},{"s":"y"}],"ls":[],"lp":[1,null,2],"ll":[[1],[],[2,3]]}`))
	rng := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 3000; it++ {
		b := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for m := rng.IntN(4) + 1; m > 0; m-- {
			i := rng.IntN(len(b))
			switch rng.IntN(3) {
			case 0:
				b[i] = byte(rng.IntN(256))
			case 1:
				b = append(b[:i], b[i+1:]...)
			case 2:
				b = append(b[:i], append([]byte{"{}[],:\"0n"[rng.IntN(9)]}, b[i:]...)...)
			}
		}
		compare[kinds](t, b)
		compare[recordWire](t, b)
	}
}
