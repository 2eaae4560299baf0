package strictjson_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
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
		`{"src":"os-image","lp":[]}`, "{\"s\":\"a\tb\"}", `{"ign":[[[[[[]]]]]]}`, `{"ign":-}`, `{"ign":tru}`, `{"u":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		compare[kinds](t, b)
		compare[recordWire](t, b)
	})
}

func compare[T any](t *testing.T, b []byte) {
	var fast, full T
	if !strictjson.DecodeFastOnly(b, &fast) {
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
